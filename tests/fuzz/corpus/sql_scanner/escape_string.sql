SELECT E'it\'s \x70g_advisory_unlock_all() \u0041 \101', 'a''b'
'continued'