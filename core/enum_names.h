// One name table per enum: the name that files, records and flags use, and the parse back.
// An enum E declares `inline constexpr EnumName<E> kENames[] = {{E::kA, "a"}, ...};` next to
// itself and calls Name(kENames, v) / ParseName(kENames, "a", "what it is").
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace cordon {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `value`; the table must list every enumerator (a unit test per table checks it).
template <typename E, std::size_t N>
constexpr std::string_view Name(const EnumName<E> (&table)[N], E value) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

// The enumerator called `name`, or invalid_input naming `what` and every accepted name.
template <typename E, std::size_t N>
Result<E> ParseName(const EnumName<E> (&table)[N], std::string_view name, std::string_view what) {
  for (const auto& entry : table) {
    if (entry.name == name) return entry.value;
  }
  std::string accepted;
  for (const auto& entry : table) {
    if (!accepted.empty()) accepted += ", ";
    accepted += "\"" + std::string(entry.name) + "\"";
  }
  return Fail(Code::kInvalidInput, std::string(what) + " must be one of " + accepted + ", not \"" +
                                       std::string(name) + "\"");
}

}  // namespace cordon
