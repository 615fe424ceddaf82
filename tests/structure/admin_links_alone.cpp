// Linked with every object of pgtether_admin (the console, SHOW, the metrics endpoint, whole
// archive) and nothing of daemon/ (tests/CMakeLists.txt): if an admin/ source called the worker,
// the worker group or the reloader directly -- instead of through AdminContext -- this program
// would not link, and the build fails.
#include <cstdio>

int main() {
    std::puts("pgtether_admin links without daemon/");
    return 0;
}
