#include "image.hpp"

#include <fstream>
#include <stdexcept>

namespace hisparse::runtime::examples {

void write_pgm(const std::string& path, int width, int height, const std::vector<std::uint8_t>& pixels) {
    std::ofstream out(path, std::ios::binary);
    if (!out) throw std::runtime_error("cannot open " + path + " for writing");
    out << "P5\n" << width << ' ' << height << "\n255\n";
    out.write(reinterpret_cast<const char*>(pixels.data()), static_cast<std::streamsize>(pixels.size()));
    if (!out) throw std::runtime_error("writing " + path + " failed");
}

}  // namespace hisparse::runtime::examples
