// Reference decoders of the 16-bit float formats written from their definitions (sign, exponent,
// mantissa), with no bit tricks, to check the library's fast conversions and reductions against.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace stragglar {

inline double ReferenceHalfValue(uint16_t bits) {
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

inline double ReferenceBfloat16Value(uint16_t bits) {
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int exponent = (bits >> 7) & 0xff;
  const int mantissa = bits & 0x7f;
  if (exponent == 0xff) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, -133);
  return sign * std::ldexp(128 + mantissa, exponent - 134);
}

inline bool IsHalfNan(uint16_t bits) { return (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0; }
inline bool IsBfloat16Nan(uint16_t bits) { return (bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0; }

}  // namespace stragglar
