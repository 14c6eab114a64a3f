// FsyncMode: how often the audit writer makes records durable. Policy parses it and the audit
// writer obeys it, so it lives below both with its one name table.
#pragma once

#include <ostream>

#include "core/enum_names.h"

namespace cordon {

// Declared from the strictest down: a project layer may only move towards kAlways.
enum class FsyncMode { kAlways, kPerCall, kNever };
inline constexpr EnumName<FsyncMode> kFsyncModeNames[] = {
    {FsyncMode::kAlways, "always"},
    {FsyncMode::kPerCall, "per_call"},
    {FsyncMode::kNever, "never"},
};

// True when `a` makes records durable at least as often as `b`.
constexpr bool AtLeastAsStrict(FsyncMode a, FsyncMode b) {
  return static_cast<int>(a) <= static_cast<int>(b);
}

inline std::ostream& operator<<(std::ostream& out, FsyncMode mode) {
  return out << Name(kFsyncModeNames, mode);
}

}  // namespace cordon
