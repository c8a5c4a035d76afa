#pragma once

namespace once {

// The value of one hexadecimal digit (0-9, a-f, A-F), or -1 for anything else. Written
// out rather than taken from a locale-aware or lenient parser: the callers refuse a
// sign, "0x" and spaces.
constexpr int hexDigitValue(unsigned char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

} // namespace once
