// Linked with every object of pgtether_net (whole archive) and nothing of the layers above it
// (tests/CMakeLists.txt): if a net/ source used anything of server/, client/, pool/, admin/ or
// daemon/, this program would not link, and the build fails. In the daemon itself such a call
// could still resolve, against an object of pgtether_proxy already on the link line.
#include <cstdio>

int main() {
    std::puts("pgtether_net links without the layers above it");
    return 0;
}
