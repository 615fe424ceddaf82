// Linked with every object of pgtether_server, pgtether_client and pgtether_pool (server/,
// client/ and pool/) and nothing of admin/ or daemon/ (tests/CMakeLists.txt): if one of those sources called the
// console or the worker directly -- instead of through ServerContext, ClientContext,
// PoolContext or ConsoleSession -- this program would not link, and the build fails.
#include <cstdio>

int main() {
    std::puts("server/, client/ and pool/ link without admin/ and daemon/");
    return 0;
}
