// The HTML-to-text pass (tools/html_text.h). Every helper takes a position and returns a later
// one (or the end), and no scan ever goes back: an unterminated construct (tag, comment,
// quoted attribute, script) runs to the end of the input, as a browser's tokenizer treats it,
// instead of being re-read as text, which is what makes a naive converter quadratic.
#include "tools/html_text.h"

#include <algorithm>
#include <array>
#include <cstdint>

#include "core/text.h"

namespace cordon {
namespace {

constexpr std::size_t kMaxTitleBytes = 1024;
constexpr std::size_t kMaxHrefBytes = 2048;
constexpr std::size_t kMaxTagName = 16;  // longer names are no element this pass knows
constexpr int kMaxListIndent = 6;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool IsControl(unsigned char c) {
  return (c < 0x20 && !IsSpace(static_cast<char>(c))) || c == 0x7f;
}

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// The named references pages use; sorted by name for the binary search.
struct NamedRef {
  std::string_view name;
  char32_t cp;
};
constexpr NamedRef kNamedRefs[] = {
    {"AMP", '&'},       {"GT", '>'},        {"LT", '<'},        {"QUOT", '"'},
    {"amp", '&'},       {"apos", '\''},     {"bull", 0x2022},   {"cent", 0xa2},
    {"copy", 0xa9},     {"dagger", 0x2020}, {"deg", 0xb0},      {"divide", 0xf7},
    {"emsp", ' '},      {"ensp", ' '},      {"euro", 0x20ac},   {"gt", '>'},
    {"hellip", 0x2026}, {"iexcl", 0xa1},    {"iquest", 0xbf},   {"laquo", 0xab},
    {"larr", 0x2190},   {"ldquo", 0x201c},  {"lsaquo", 0x2039}, {"lsquo", 0x2018},
    {"lt", '<'},        {"mdash", 0x2014},  {"micro", 0xb5},    {"middot", 0xb7},
    {"nbsp", ' '},      {"ndash", 0x2013},  {"para", 0xb6},     {"plusmn", 0xb1},
    {"pound", 0xa3},    {"quot", '"'},      {"raquo", 0xbb},    {"rarr", 0x2192},
    {"rdquo", 0x201d},  {"reg", 0xae},      {"rsaquo", 0x203a}, {"rsquo", 0x2019},
    {"sect", 0xa7},     {"shy", 0},         {"thinsp", ' '},    {"times", 0xd7},
    {"trade", 0x2122},  {"yen", 0xa5},      {"zwj", 0},         {"zwnj", 0},
};
// Legacy references a browser also takes without the ';'.
bool TakesNoSemicolon(std::string_view name) {
  return name == "amp" || name == "lt" || name == "gt" || name == "quot" || name == "nbsp" ||
         name == "copy" || name == "reg" || name == "AMP" || name == "LT" || name == "GT" ||
         name == "QUOT";
}

constexpr char32_t kReplacement = 0xfffd;
constexpr char32_t kNothing = 0x110000;  // a reference that stands for no character (&shy;)

// s[i] == '&'. Sets *cp to the character and returns the position after the reference; a '&'
// that starts no reference is itself (returns i + 1).
std::size_t DecodeReference(std::string_view s, std::size_t i, char32_t* cp) {
  const std::size_t n = s.size();
  *cp = '&';
  std::size_t j = i + 1;
  if (j < n && s[j] == '#') {
    ++j;
    const bool hex = j < n && (s[j] == 'x' || s[j] == 'X');
    if (hex) ++j;
    std::uint32_t value = 0;
    std::size_t digits = 0;
    for (; j < n; ++j, ++digits) {
      const char c = s[j];
      std::uint32_t d;
      if (IsDigit(c)) {
        d = static_cast<std::uint32_t>(c - '0');
      } else if (hex && Lower(c) >= 'a' && Lower(c) <= 'f') {
        d = static_cast<std::uint32_t>(Lower(c) - 'a' + 10);
      } else {
        break;
      }
      // Saturates past U+10FFFF: a million digits cost a million steps, never an overflow.
      value = std::min<std::uint32_t>(value * (hex ? 16 : 10) + d, 0x110000);
    }
    if (digits == 0) return i + 1;
    if (j < n && s[j] == ';') ++j;
    const bool surrogate = value >= 0xd800 && value <= 0xdfff;
    const bool control =
        (value < 0x20 && !IsSpace(static_cast<char>(value))) || (value >= 0x7f && value <= 0x9f);
    *cp = value == 0 || value > 0x10ffff || surrogate || control ? kReplacement : value;
    return j;
  }
  std::size_t k = j;
  while (k < n && k - j < 32 && (IsAlpha(s[k]) || IsDigit(s[k]))) ++k;
  const std::string_view name = s.substr(j, k - j);
  if (name.empty()) return i + 1;
  const bool semicolon = k < n && s[k] == ';';
  const auto* it =
      std::lower_bound(std::begin(kNamedRefs), std::end(kNamedRefs), name,
                       [](const NamedRef& r, std::string_view v) { return r.name < v; });
  if (it == std::end(kNamedRefs) || it->name != name) return i + 1;
  if (!semicolon && !TakesNoSemicolon(name)) return i + 1;
  *cp = it->cp == 0 ? kNothing : it->cp;
  return semicolon ? k + 1 : k;
}

// The output: whitespace collapsed outside <pre>, line breaks and prefixes ("- ", "## ")
// requested by elements and written only before the next visible character, so that empty
// elements leave no blank lines behind. Stops at its cap.
class TextOut {
 public:
  explicit TextOut(std::size_t cap) : cap_(cap) {}
  bool full() const { return full_; }
  std::size_t size() const { return out_.size(); }
  std::string_view view() const { return out_; }

  // Ends the current line: lines = 1 a line break, 2 a blank line.
  void Break(int lines) {
    pending_breaks_ = std::max(pending_breaks_, std::min(lines, 2));
    pending_space_ = false;
  }
  void LineBreak() {  // <br>: each one counts, up to a blank line
    pending_breaks_ = std::min(pending_breaks_ + 1, 2);
    pending_space_ = false;
  }
  void Prefix(std::string_view p) {
    if (prefix_.size() + p.size() <= 32) prefix_ += p;
  }
  void DropPrefix() { prefix_.clear(); }
  void Space() {
    if (!out_.empty() || !prefix_.empty()) pending_space_ = true;
  }

  // Text as it appears in the document: runs of whitespace become one space unless `pre`.
  void Text(std::string_view t, bool pre) {
    std::size_t i = 0;
    while (i < t.size() && !full_) {
      const char c = t[i];
      if (IsSpace(c)) {
        if (!pre) {
          Space();
        } else if (c == '\n' || (c == '\r' && (i + 1 >= t.size() || t[i + 1] != '\n'))) {
          Flush();
          Append("\n");
          pending_space_ = false;
        } else if (c != '\r') {
          Flush();
          Append(std::string_view(&c, 1));
        }
        ++i;
        continue;
      }
      if (IsControl(static_cast<unsigned char>(c))) {
        ++i;
        continue;
      }
      std::size_t j = i + 1;
      while (j < t.size() && !IsSpace(t[j]) && !IsControl(static_cast<unsigned char>(t[j]))) ++j;
      Flush();
      Append(t.substr(i, j - i));
      i = j;
    }
  }
  void Char(char32_t cp, bool pre) {
    if (cp == kNothing) return;
    std::string buf;
    AppendUtf8(buf, cp);
    Text(buf, pre);
  }

  // Valid UTF-8, without trailing whitespace, at most the cap (the repair of invalid bytes may
  // have grown it: cut back on a code point boundary).
  std::string Finish(bool* truncated) {
    std::string text = RepairUtf8(out_);
    while (!text.empty() && IsSpace(text.back())) text.pop_back();
    if (text.size() > cap_) {
      std::size_t at = cap_;
      while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xc0) == 0x80) --at;
      text.resize(at);
      full_ = true;
    }
    *truncated = full_;
    return text;
  }

 private:
  void Flush() {
    if (!out_.empty() && pending_breaks_ > 0) {
      int have = 0;
      for (std::size_t k = out_.size(); k > 0 && have < 2 && out_[k - 1] == '\n'; --k) ++have;
      for (int k = have; k < pending_breaks_; ++k) Append("\n");
      pending_space_ = false;
    }
    pending_breaks_ = 0;
    if (!prefix_.empty()) {
      if (!out_.empty() && out_.back() != '\n') Append("\n");
      Append(prefix_);
      prefix_.clear();
      pending_space_ = false;
    }
    if (pending_space_ && !out_.empty() && out_.back() != '\n' && out_.back() != ' ') Append(" ");
    pending_space_ = false;
  }
  void Append(std::string_view t) {
    if (full_) return;
    if (out_.size() + t.size() > cap_) {
      // Cut on a code point boundary: half a character would come back as U+FFFD.
      std::size_t take = cap_ - out_.size();
      while (take > 0 && take < t.size() && (static_cast<unsigned char>(t[take]) & 0xc0) == 0x80)
        --take;
      out_.append(t.substr(0, take));
      full_ = true;
      return;
    }
    out_.append(t);
  }

  std::string out_;
  std::size_t cap_;
  std::string prefix_;
  int pending_breaks_ = 0;
  bool pending_space_ = false;
  bool full_ = false;
};

enum class Kind {
  kOther,
  kBlock,      // a line break before and after
  kParagraph,  // a blank line before and after
  kHeading,
  kList,
  kListItem,
  kPre,
  kBr,
  kCell,
  kRow,
  kAnchor,
  kSkip,      // dropped with its content, up to the first matching end tag
  kTitle,     // RCDATA into the title
  kTextarea,  // RCDATA into the text
  kPlaintext,
};
struct Element {
  std::string_view name;
  Kind kind;
};
// Sorted by name for the binary search.
constexpr Element kElements[] = {
    {"a", Kind::kAnchor},
    {"address", Kind::kBlock},
    {"article", Kind::kParagraph},
    {"aside", Kind::kParagraph},
    {"blockquote", Kind::kParagraph},
    {"body", Kind::kBlock},
    {"br", Kind::kBr},
    {"caption", Kind::kBlock},
    {"center", Kind::kBlock},
    {"dd", Kind::kBlock},
    {"details", Kind::kBlock},
    {"dialog", Kind::kBlock},
    {"dir", Kind::kList},
    {"div", Kind::kBlock},
    {"dl", Kind::kParagraph},
    {"dt", Kind::kBlock},
    {"fieldset", Kind::kBlock},
    {"figcaption", Kind::kBlock},
    {"figure", Kind::kParagraph},
    {"footer", Kind::kParagraph},
    {"form", Kind::kBlock},
    {"h1", Kind::kHeading},
    {"h2", Kind::kHeading},
    {"h3", Kind::kHeading},
    {"h4", Kind::kHeading},
    {"h5", Kind::kHeading},
    {"h6", Kind::kHeading},
    {"head", Kind::kBlock},
    {"header", Kind::kParagraph},
    {"hgroup", Kind::kBlock},
    {"hr", Kind::kParagraph},
    {"html", Kind::kBlock},
    {"iframe", Kind::kSkip},
    {"legend", Kind::kBlock},
    {"li", Kind::kListItem},
    {"listing", Kind::kPre},
    {"main", Kind::kParagraph},
    {"menu", Kind::kList},
    {"nav", Kind::kParagraph},
    {"noembed", Kind::kSkip},
    {"noframes", Kind::kSkip},
    {"noscript", Kind::kSkip},
    {"ol", Kind::kList},
    {"option", Kind::kBlock},
    {"p", Kind::kParagraph},
    {"plaintext", Kind::kPlaintext},
    {"pre", Kind::kPre},
    {"script", Kind::kSkip},
    {"section", Kind::kParagraph},
    {"select", Kind::kBlock},
    {"style", Kind::kSkip},
    {"summary", Kind::kBlock},
    {"table", Kind::kParagraph},
    {"tbody", Kind::kBlock},
    {"td", Kind::kCell},
    {"template", Kind::kSkip},
    {"textarea", Kind::kTextarea},
    {"tfoot", Kind::kBlock},
    {"th", Kind::kCell},
    {"thead", Kind::kBlock},
    {"title", Kind::kTitle},
    {"tr", Kind::kRow},
    {"ul", Kind::kList},
    {"xmp", Kind::kPre},
};

static_assert(std::ranges::is_sorted(kNamedRefs, {}, &NamedRef::name));
static_assert(std::ranges::is_sorted(kElements, {}, &Element::name));

Kind KindOf(std::string_view name) {
  const auto* it =
      std::lower_bound(std::begin(kElements), std::end(kElements), name,
                       [](const Element& e, std::string_view v) { return e.name < v; });
  return it != std::end(kElements) && it->name == name ? it->kind : Kind::kOther;
}

bool StartsWithNoCase(std::string_view s, std::size_t at, std::string_view prefix) {
  if (s.size() - at < prefix.size()) return false;
  for (std::size_t k = 0; k < prefix.size(); ++k) {
    if (Lower(s[at + k]) != prefix[k]) return false;
  }
  return true;
}

// The position of the '<' of the first `</name` (followed by whitespace, '/', '>' or the end)
// at or after `from`, else npos. One forward scan.
std::size_t FindEndTag(std::string_view s, std::size_t from, std::string_view name) {
  for (std::size_t p = s.find("</", from); p != std::string_view::npos; p = s.find("</", p + 1)) {
    if (!StartsWithNoCase(s, p + 2, name)) continue;
    const std::size_t after = p + 2 + name.size();
    if (after >= s.size() || IsSpace(s[after]) || s[after] == '/' || s[after] == '>') return p;
  }
  return std::string_view::npos;
}

std::size_t SkipPast(std::string_view s, std::size_t from, char c) {
  const std::size_t p = s.find(c, from);
  return p == std::string_view::npos ? s.size() : p + 1;
}

class Converter {
 public:
  Converter(std::string_view s, const HtmlTextOptions& o)
      : s_(s), opts_(o), out_(o.max_output_bytes), title_(kMaxTitleBytes) {}

  HtmlText Run() {
    const std::size_t n = s_.size();
    std::size_t i = 0;
    while (i < n && !out_.full()) {
      const char c = s_[i];
      if (c == '<') {
        i = Markup(i);
      } else if (c == '&') {
        char32_t cp;
        i = DecodeReference(s_, i, &cp);
        Visible();
        out_.Char(cp, pre_ > 0);
      } else {
        std::size_t j = s_.find_first_of("<&", i);
        if (j == std::string_view::npos) j = n;
        const std::string_view run = s_.substr(i, j - i);
        if (run.find_first_not_of(" \t\n\r\f") != std::string_view::npos) Visible();
        out_.Text(run, pre_ > 0);
        i = j;
      }
    }
    HtmlText r;
    r.text = out_.Finish(&r.truncated);
    bool title_cut = false;
    r.title = title_.Finish(&title_cut);
    return r;
  }

 private:
  // A table cell separator is owed once visible text came before it in the row.
  void Visible() {
    if (cell_owed_) {
      cell_owed_ = false;
      out_.Text(" | ", false);
    }
  }

  // s_[i] == '<': a tag, comment, doctype or a literal '<'. Returns the position after it.
  std::size_t Markup(std::size_t i) {
    const std::size_t n = s_.size();
    if (i + 1 >= n) {
      out_.Text("<", pre_ > 0);
      return n;
    }
    const char c = s_[i + 1];
    if (c == '!') {
      if (s_.compare(i, 4, "<!--") == 0) {
        // "<!-->" and "<!--->" are whole (empty) comments; otherwise up to "-->", or the end.
        if (s_.compare(i + 4, 1, ">") == 0) return i + 5;
        if (s_.compare(i + 4, 2, "->") == 0) return i + 6;
        const std::size_t e = s_.find("-->", i + 4);
        return e == std::string_view::npos ? n : e + 3;
      }
      if (s_.compare(i, 9, "<![CDATA[") == 0) {
        const std::size_t e = s_.find("]]>", i + 9);
        return e == std::string_view::npos ? n : e + 3;
      }
      return SkipPast(s_, i + 2, '>');  // doctype, bogus comment
    }
    if (c == '?') return SkipPast(s_, i + 2, '>');
    if (c == '/') {
      if (i + 2 >= n) {
        out_.Text("</", pre_ > 0);
        return n;
      }
      if (s_[i + 2] == '>') return i + 3;
      if (!IsAlpha(s_[i + 2])) return SkipPast(s_, i + 2, '>');
      std::string name;
      std::size_t j = TagName(i + 2, &name);
      bool closed = false;
      j = Attributes(j, false, nullptr, &closed);
      if (closed) EndTag(name);
      return j;
    }
    if (!IsAlpha(c)) {
      out_.Text("<", pre_ > 0);
      return i + 1;
    }
    std::string name;
    std::size_t j = TagName(i + 1, &name);
    const Kind kind = KindOf(name);
    std::string href;
    bool closed = false;
    j = Attributes(j, kind == Kind::kAnchor && opts_.link_targets, &href, &closed);
    if (!closed) return j;  // a tag the input ends inside is no tag
    return StartTag(name, kind, std::move(href), j);
  }

  // The tag name from `at`, lower case; a name longer than any known element is left empty.
  std::size_t TagName(std::size_t at, std::string* name) {
    std::size_t j = at;
    while (j < s_.size() && !IsSpace(s_[j]) && s_[j] != '/' && s_[j] != '>') {
      if (name->size() <= kMaxTagName) *name += Lower(s_[j]);
      ++j;
    }
    if (name->size() > kMaxTagName) name->clear();
    return j;
  }

  // The attributes up to and past '>' (*closed), or to the end of the input when the tag is
  // never closed (a quote never closed swallows the rest, as in a browser). Keeps href when
  // asked, if it fits.
  std::size_t Attributes(std::size_t j, bool want_href, std::string* href, bool* closed) {
    const std::size_t n = s_.size();
    *closed = false;
    while (j < n) {
      while (j < n && (IsSpace(s_[j]) || s_[j] == '/')) ++j;
      if (j >= n) break;
      if (s_[j] == '>') {
        *closed = true;
        return j + 1;
      }
      // The name: at least one character ('=' may start one), so every round moves on.
      const std::size_t name_at = j;
      ++j;
      while (j < n && !IsSpace(s_[j]) && s_[j] != '/' && s_[j] != '>' && s_[j] != '=') ++j;
      const bool is_href = want_href && j - name_at == 4 && StartsWithNoCase(s_, name_at, "href");
      std::size_t k = j;
      while (k < n && IsSpace(s_[k])) ++k;
      if (k >= n || s_[k] != '=') continue;
      j = k + 1;
      while (j < n && IsSpace(s_[j])) ++j;
      if (j >= n) break;
      std::string_view value;
      if (s_[j] == '"' || s_[j] == '\'') {
        const std::size_t e = s_.find(s_[j], j + 1);
        if (e == std::string_view::npos) return n;
        value = s_.substr(j + 1, e - j - 1);
        j = e + 1;
      } else {
        const std::size_t v = j;
        while (j < n && !IsSpace(s_[j]) && s_[j] != '>') ++j;
        value = s_.substr(v, j - v);
      }
      if (is_href && href->empty() && value.size() <= kMaxHrefBytes) *href = DecodeAttribute(value);
    }
    return n;
  }

  static std::string DecodeAttribute(std::string_view v) {
    std::string out;
    for (std::size_t i = 0; i < v.size();) {
      if (v[i] != '&') {
        out += v[i++];
        continue;
      }
      char32_t cp;
      i = DecodeReference(v, i, &cp);
      if (cp != kNothing) AppendUtf8(out, cp);
    }
    return out;
  }

  // Only an absolute http(s) URL with nothing a reader could be fooled by (spaces, controls).
  static bool ShowableLink(std::string_view href) {
    if (!StartsWithNoCase(href, 0, "http://") && !StartsWithNoCase(href, 0, "https://")) {
      return false;
    }
    for (char ch : href) {
      if (IsSpace(ch) || IsControl(static_cast<unsigned char>(ch))) return false;
    }
    return true;
  }

  std::size_t StartTag(const std::string& name, Kind kind, std::string href, std::size_t j) {
    const bool pre = pre_ > 0;
    switch (kind) {
      case Kind::kSkip: {
        const std::size_t e = FindEndTag(s_, j, name);
        return e == std::string_view::npos ? s_.size() : SkipPast(s_, e + 2, '>');
      }
      case Kind::kTitle:
      case Kind::kTextarea: {
        const std::size_t e = FindEndTag(s_, j, name);
        const std::string_view body =
            s_.substr(j, (e == std::string_view::npos ? s_.size() : e) - j);
        if (kind == Kind::kTitle) {
          if (!have_title_) Rcdata(body, title_, false);
          have_title_ = true;
        } else {
          out_.Break(1);
          Visible();
          Rcdata(body, out_, pre);
          out_.Break(1);
        }
        return e == std::string_view::npos ? s_.size() : SkipPast(s_, e + 2, '>');
      }
      case Kind::kPlaintext:
        out_.Break(1);
        out_.Text(s_.substr(j), true);
        return s_.size();
      case Kind::kBlock:
        out_.Break(1);
        break;
      case Kind::kParagraph:
        out_.Break(2);
        break;
      case Kind::kHeading:
        out_.Break(2);
        out_.Prefix(std::string(static_cast<std::size_t>(name[1] - '0'), '#') + " ");
        break;
      case Kind::kList:
        if (list_depth_ == 0) out_.Break(2);
        ++list_depth_;
        break;
      case Kind::kListItem:
        out_.Break(1);
        out_.DropPrefix();  // an item with no text before the next one leaves nothing
        out_.Prefix(std::string(
            2 * static_cast<std::size_t>(std::clamp(list_depth_ - 1, 0, kMaxListIndent)), ' '));
        out_.Prefix("- ");
        break;
      case Kind::kPre:
        out_.Break(2);
        ++pre_;
        break;
      case Kind::kBr:
        out_.LineBreak();
        break;
      case Kind::kRow:
        out_.Break(1);
        cell_owed_ = false;
        row_has_cell_ = false;
        break;
      case Kind::kCell:
        if (row_has_cell_) cell_owed_ = true;
        row_has_cell_ = true;
        break;
      case Kind::kAnchor:
        link_.clear();
        if (ShowableLink(href)) {
          link_ = std::move(href);
          link_at_ = out_.size();
        }
        break;
      case Kind::kOther:
        break;
    }
    return j;
  }

  void EndTag(const std::string& name) {
    switch (KindOf(name)) {
      case Kind::kBlock:
      case Kind::kListItem:
        out_.DropPrefix();
        out_.Break(1);
        break;
      case Kind::kParagraph:
      case Kind::kHeading:
        out_.DropPrefix();
        out_.Break(2);
        break;
      case Kind::kList:
        if (list_depth_ > 0) --list_depth_;
        out_.DropPrefix();
        out_.Break(list_depth_ == 0 ? 2 : 1);
        break;
      case Kind::kPre:
        if (pre_ > 0) --pre_;
        out_.Break(2);
        break;
      case Kind::kRow:
        cell_owed_ = false;
        row_has_cell_ = false;
        out_.Break(1);
        break;
      case Kind::kBr:  // "</br>" is a <br> to a browser
        out_.LineBreak();
        break;
      case Kind::kAnchor:
        if (!link_.empty() && out_.size() > link_at_) {
          std::string_view label = out_.view().substr(link_at_);
          while (!label.empty() && IsSpace(label.front())) label.remove_prefix(1);
          if (label != link_) out_.Text(" (" + link_ + ")", false);
        }
        link_.clear();
        break;
      default:
        break;
    }
  }

  // Text with references decoded and '<' literal (title, textarea).
  static void Rcdata(std::string_view body, TextOut& to, bool pre) {
    std::size_t i = 0;
    while (i < body.size() && !to.full()) {
      if (body[i] == '&') {
        char32_t cp;
        i = DecodeReference(body, i, &cp);
        to.Char(cp, pre);
        continue;
      }
      std::size_t j = body.find('&', i);
      if (j == std::string_view::npos) j = body.size();
      to.Text(body.substr(i, j - i), pre);
      i = j;
    }
  }

  std::string_view s_;
  const HtmlTextOptions& opts_;
  TextOut out_;
  TextOut title_;
  bool have_title_ = false;
  int pre_ = 0;
  int list_depth_ = 0;
  bool row_has_cell_ = false;
  bool cell_owed_ = false;
  std::string link_;
  std::size_t link_at_ = 0;
};

}  // namespace

HtmlText HtmlToText(std::string_view html, const HtmlTextOptions& options) {
  return Converter(html, options).Run();
}

}  // namespace cordon
