#pragma once
// Writes an 8-bit greyscale image as binary PGM (no image library needed).
#include <cstdint>
#include <string>
#include <vector>

namespace hisparse::runtime::examples {
void write_pgm(const std::string& path, int width, int height, const std::vector<std::uint8_t>& pixels);
}
