#include "tests/integration/support/scratch_database.hpp"

#include <unistd.h>

#include "tests/integration/support/pq.hpp"

namespace pgtether::itest {

ScratchDatabase::ScratchDatabase(const std::string& prefix)
    : name_(prefix + "_" + std::to_string(getpid())) {
    Conn admin = Conn::must(direct_conninfo());
    admin.exec_ok("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
    admin.exec_ok("CREATE DATABASE " + name_);
}

ScratchDatabase::~ScratchDatabase() {
    Conn admin(direct_conninfo());
    if (admin.ok()) (void)admin.exec("DROP DATABASE IF EXISTS " + name_ + " WITH (FORCE)");
}

void ScratchDatabase::exec_ok(const std::string& sql) const {
    Conn conn = Conn::must(direct_conninfo("", name_));
    conn.exec_ok(sql);
}

}  // namespace pgtether::itest
