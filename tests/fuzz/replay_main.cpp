// main() for a harness in the normal build (no libFuzzer): runs it once on
// each file named, or on every file of each directory named. The host suite
// replays the committed regression inputs and the seed corpus this way, so
// a crash once found stays fixed without clang.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const fs::path p = argv[i];
    if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p)) {
        if (e.is_regular_file()) inputs.push_back(e.path());
      }
    } else if (fs::exists(p)) {
      inputs.push_back(p);
    } else {
      std::fprintf(stderr, "replay: %s does not exist\n", p.c_str());
      return 2;
    }
  }
  for (const fs::path& p : inputs) {
    std::ifstream f(p, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    try {
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "replay: %s: %s\n", p.c_str(), e.what());
      return 1;
    }
  }
  std::printf("replayed %zu inputs\n", inputs.size());
  return inputs.empty() ? 77 : 0;
}
