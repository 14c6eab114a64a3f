// HTML reduced to readable text for read_url, in one linear pass with bounded state: no DOM, no
// recursion, no regular expressions. The HTML it reads is hostile (unclosed tags, `<` floods,
// megabytes of nesting, quotes never closed): every scan moves forward only, so the time is
// linear in the input and the memory is the output cap plus a few small buffers.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cordon {

struct HtmlTextOptions {
  std::size_t max_output_bytes = 1 << 20;  // the text is cut here (on a code point boundary)
  // Append " (URL)" after a link's text when its href is an absolute http(s) URL.
  bool link_targets = true;
};

struct HtmlText {
  std::string text;        // valid UTF-8, whitespace collapsed outside <pre>, at most the cap
  std::string title;       // the first <title>, collapsed, at most 1 KiB; empty when none
  bool truncated = false;  // the cap cut the text
};

// What is kept and what is dropped:
// - dropped: <script>, <style>, <noscript>, <template>, <iframe>, <noembed>, <noframes> and
//   their content (each ends at the first `</name`, as a browser ends it, even inside a string
//   literal); comments, the doctype, <?...?> and CDATA sections; every tag and attribute;
// - <title> becomes `title`, not text; <textarea> content is text, its markup literal;
// - block elements (p, div, br, li, h1-h6, tr, pre, section, article, table, ...) become line
//   breaks, paragraphs and headings a blank line; li gets "- " (indented by list depth), hN gets
//   N "#"s, table cells are separated by " | ";
// - character references: the common named ones and &#N; / &#xN; (0, surrogates, controls and
//   values past U+10FFFF become U+FFFD); &nbsp; is a plain space;
// - invalid UTF-8: U+FFFD; control characters but tab and newline (NUL too) are dropped.
HtmlText HtmlToText(std::string_view html, const HtmlTextOptions& options = {});

}  // namespace cordon
