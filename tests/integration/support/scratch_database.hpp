// A database of a test's own, created on a direct superuser connection and dropped (with whatever
// is still connected) when the test ends: for tests that another test running at the same time
// (ctest -j) could disturb in the shared one -- through writes to shared tables, or through
// catalog changes that make pgtether's lock discovery look again, during which calls count as
// unknown and tether their clients.
#pragma once

#include <string>

namespace pgtether::itest {

class ScratchDatabase {
  public:
    // `prefix` names the test; the process id is appended, so that two runs never share one.
    explicit ScratchDatabase(const std::string& prefix);
    ~ScratchDatabase();
    ScratchDatabase(const ScratchDatabase&) = delete;
    ScratchDatabase& operator=(const ScratchDatabase&) = delete;

    [[nodiscard]] const std::string& name() const { return name_; }
    // Runs `sql` in the database on a direct superuser connection; fails the test on an error.
    void exec_ok(const std::string& sql) const;

  private:
    std::string name_;
};

}  // namespace pgtether::itest
