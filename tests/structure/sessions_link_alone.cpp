// Linked with every object of pgtether_sessions (server/, client/ and pool/, whole archive) and
// nothing of admin/ or daemon/ (tests/CMakeLists.txt): if one of those sources called the
// console or the worker directly -- instead of through ServerContext, ClientContext,
// PoolContext or ConsoleSession -- this program would not link, and the build fails.
#include <cstdio>

int main() {
    std::puts("pgtether_sessions links without admin/ and daemon/");
    return 0;
}
