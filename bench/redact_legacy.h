// The redactor as it was before issue 19 (commit 27ffb59): the benchmark's baseline.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cordon::legacy {

class Redactor {
 public:
  struct Span {
    std::size_t begin = 0, end = 0, keep = 0;
    std::string_view rule;
  };
  void AddValue(std::string rule, std::string value);
  std::vector<Span> Find(std::string_view text) const;
  std::size_t Redact(std::string& text) const;

 private:
  std::vector<std::pair<std::string, std::string>> values_;
};

}  // namespace cordon::legacy
