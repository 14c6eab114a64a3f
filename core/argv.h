// A process's argument list, shared between its copies until one of them changes it.
//
// A request's argv is copied at every layer a launch passes through (the tool's request, the
// warm variant of it, the one handed to the egress binding, the running process's own), and an
// agent's argv can be a megabyte (issue 33: 30 calls in flight with 1 MiB of arguments each held
// about four copies apiece). Argv copies share one immutable list; a change to a copy that is
// shared makes that copy its own first, so a change never shows through another copy.
//
// Each Argv object belongs to one thread at a time, as a std::vector would; the shared list is
// never written while another copy holds it.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

namespace cordon {

class Argv {
 public:
  using List = std::vector<std::string>;
  using value_type = std::string;
  using size_type = std::size_t;
  using const_iterator = List::const_iterator;
  using iterator = const_iterator;

  Argv() = default;
  Argv(List list) : list_(std::make_shared<List>(std::move(list))) {}  // NOLINT: a vector is one
  Argv(std::initializer_list<std::string> list) : list_(std::make_shared<List>(list)) {}

  // Read as a vector (what every reader of an argv takes).
  const List& get() const { return list_ ? *list_ : Empty(); }
  operator const List&() const { return get(); }  // NOLINT: an Argv reads as its vector

  std::size_t size() const { return get().size(); }
  bool empty() const { return get().empty(); }
  const std::string& operator[](std::size_t i) const { return get()[i]; }
  const std::string& front() const { return get().front(); }
  const std::string& back() const { return get().back(); }
  const_iterator begin() const { return get().begin(); }
  const_iterator end() const { return get().end(); }

  // Changes: on a list another copy shares, after making it this copy's own.
  void push_back(std::string s) { Own().push_back(std::move(s)); }
  template <class It>
  void append(It first, It last) {
    Own().insert(Own().end(), first, last);
  }
  void set(std::size_t i, std::string s) { Own()[i] = std::move(s); }
  void clear() { list_.reset(); }

  friend bool operator==(const Argv& a, const Argv& b) { return a.get() == b.get(); }

 private:
  static const List& Empty() {
    static const List kEmpty;
    return kEmpty;
  }
  List& Own() {
    if (!list_) {
      list_ = std::make_shared<List>();
    } else if (list_.use_count() > 1) {
      list_ = std::make_shared<List>(*list_);
    }
    return *list_;
  }
  std::shared_ptr<List> list_;
};

// As a JSON array of strings.
void to_json(nlohmann::json& j, const Argv& argv);

}  // namespace cordon
