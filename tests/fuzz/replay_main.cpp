// A main() for fuzz targets in builds without libFuzzer: runs LLVMFuzzerTestOneInput over every
// file in the directories (or files) named on the command line, so ctest replays the committed
// seed corpus and every committed crash input on each build, with any compiler. A path that does
// not exist is skipped: a target may have no corpus or no crashes yet.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

void collect(const fs::path& path, std::vector<fs::path>& files) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
        for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end;
             it.increment(ec)) {
            if (it->is_regular_file(ec)) files.push_back(it->path());
        }
    } else if (fs::is_regular_file(path, ec)) {
        files.push_back(path);
    } else {
        std::fprintf(stderr, "replay: %s does not exist, skipped\n", path.c_str());
    }
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<fs::path> files;
    for (int i = 1; i < argc; ++i)
        collect(argv[i], files);
    std::sort(files.begin(), files.end());

    // The empty input always runs; libFuzzer passes a valid pointer even then.
    const std::uint8_t none = 0;
    LLVMFuzzerTestOneInput(&none, 0);

    for (const fs::path& file : files) {
        std::ifstream in(file, std::ios::binary);
        if (!in) {
            std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
            return 1;
        }
        const std::vector<std::uint8_t> data{std::istreambuf_iterator<char>(in),
                                             std::istreambuf_iterator<char>()};
        // Named before it runs, so the log of a crash says which input it was.
        std::fprintf(stderr, "replay: %s (%zu bytes)\n", file.c_str(), data.size());
        LLVMFuzzerTestOneInput(data.empty() ? &none : data.data(), data.size());
    }
    std::printf("replayed %zu inputs\n", files.size() + 1);
    return 0;
}
