// HTML to text (tools/html_text.h): what is kept and dropped, table-driven; and hostile input
// (unclosed tags, `<` floods, deep nesting, quotes never closed) of several megabytes, whose
// output is checked exactly (the linear pass finishes them in milliseconds; the lead's ASan
// build checks that nothing is read out of bounds).
#include "tools/html_text.h"

#include <gtest/gtest.h>

#include "core/text.h"

namespace cordon {
namespace {

std::string Text(std::string_view html) { return HtmlToText(html).text; }

TEST(HtmlText, Table) {
  struct Case {
    std::string html, text;
  };
  const Case cases[] = {
      {"", ""},
      {"plain  text\n\n here", "plain text here"},
      {"<p>one</p><p>two</p>", "one\n\ntwo"},
      {"a<br>b<br/><br>c", "a\nb\n\nc"},
      {"<div>a</div><div>b</div>", "a\nb"},
      {"<ul><li>x</li><li>y</li></ul>", "- x\n- y"},
      {"<ul><li>x<ul><li>inner</li></ul></li></ul>", "- x\n  - inner"},
      {"<h1>Title</h1>body", "# Title\n\nbody"},
      {"<h3>Sub</h3>", "### Sub"},
      {"<pre>  a\n    b</pre>after", "  a\n    b\n\nafter"},
      {"<table><tr><td>a</td><td>b</td></tr><tr><th>c</th><td>d</td></tr></table>", "a | b\nc | d"},
      // Dropped with their content.
      {"a<script>var s = '<p>hi</p>';</script>b", "ab"},
      {"a<style>p { color: red }</style>b", "ab"},
      {"a<noscript>enable js</noscript>b", "ab"},
      {"a<template><p>t</p></template>b", "ab"},
      {"a<!-- comment <p>x</p> -->b", "ab"},
      {"<!DOCTYPE html><html><head><title>T &amp; U</title><meta charset=utf-8>"
       "<link rel=x href=y></head><body>hello</body></html>",
       "hello"},
      {"a<![CDATA[ x < y ]]>b", "ab"},
      {"a<?php echo 1 ?>b", "ab"},
      // A script ends at the first </script, also inside a string literal, as in a browser.
      {"<script>var s = \"</script>\";</script>after", "\";after"},
      {"<SCRIPT>x</Script >y", "y"},
      {"<scripty>kept</scripty>", "kept"},
      // References.
      {"&lt;b&gt; &amp; &quot;q&quot; &#39;s&#39; &#x41;&#X42;&#67;", "<b> & \"q\" 's' ABC"},
      {"caf&eacute; &unknown; & &amp", "caf&eacute; &unknown; & &"},
      {"a&nbsp;b &copy; &mdash; &hellip;", "a b \xc2\xa9 \xe2\x80\x94 \xe2\x80\xa6"},
      {"&#0; &#xD800; &#x110000; &#99999999999999999999; &#1;",
       "\xef\xbf\xbd \xef\xbf\xbd \xef\xbf\xbd \xef\xbf\xbd \xef\xbf\xbd"},
      {"&#; &#x; &", "&#; &#x; &"},
      {"&#128512;", "\xf0\x9f\x98\x80"},
      // Links: absolute http(s) targets are shown, others not.
      {"see <a href=\"https://example.com/a?b=1&amp;c=2\">the docs</a>.",
       "see the docs (https://example.com/a?b=1&c=2)."},
      {"<a href='/relative'>rel</a> <a href=\"javascript:alert(1)\">js</a>", "rel js"},
      {"<a href=\"https://x.test/\">https://x.test/</a>", "https://x.test/"},
      {"<a href=\"https://x.test/\"></a>z", "z"},
      // Literal '<' that starts no tag.
      {"1 < 2 and 3 <4", "1 < 2 and 3 <4"},
      {"a </ b", "a"},  // "</ b" is a bogus comment running to the end
      {"x<", "x<"},
      {"a</>b", "ab"},
      // Invalid UTF-8 and controls.
      {"bad \xff\xfe bytes", "bad \xef\xbf\xbd\xef\xbf\xbd bytes"},
      {std::string("n\0u\x1bl", 5), "nul"},
      // An attribute with a '>' inside quotes does not end the tag.
      {"<p title=\"a > b\">text</p>", "text"},
      {"<textarea><b>raw</b> &amp;</textarea>", "<b>raw</b> &"},
      {"<plaintext><b>everything</b>", "<b>everything</b>"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Text(c.html), c.text) << c.html;
  }
}

TEST(HtmlText, TitleIsKeptApart) {
  HtmlText r = HtmlToText("<title>  The\n &lt;Title&gt;  </title><title>second</title>body");
  EXPECT_EQ(r.title, "The <Title>");
  EXPECT_EQ(r.text, "body");
  EXPECT_EQ(HtmlToText("<title>" + std::string(5000, 'x')).title.size(), 1024u);
}

TEST(HtmlText, CapCutsOnACodePoint) {
  HtmlTextOptions o;
  o.max_output_bytes = 10;
  HtmlText r = HtmlToText("<p>" + std::string(20, 'a') + "</p>", o);
  EXPECT_EQ(r.text, std::string(10, 'a'));
  EXPECT_TRUE(r.truncated);
  // 4 two-byte characters do not fit in 7 bytes: 3 of them do, never half of the fourth.
  o.max_output_bytes = 7;
  r = HtmlToText("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", o);
  EXPECT_EQ(r.text, "\xc3\xa9\xc3\xa9\xc3\xa9");
  EXPECT_TRUE(r.truncated);
  r = HtmlToText("short", o);
  EXPECT_FALSE(r.truncated);
  // Invalid bytes that grow into U+FFFD still fit the cap.
  o.max_output_bytes = 8;
  r = HtmlToText("\xff\xff\xff\xff\xff\xff\xff\xff", o);
  EXPECT_LE(r.text.size(), 8u);
  EXPECT_EQ(RepairUtf8(r.text), r.text);
}

TEST(HtmlText, LinksCanBeLeftOut) {
  HtmlTextOptions o;
  o.link_targets = false;
  EXPECT_EQ(HtmlToText("<a href=\"https://x.test/\">x</a>", o).text, "x");
}

// Hostile inputs of megabytes: each runs to its exact expected text. Each is one of the shapes
// that make a regex- or backtracking-based stripper quadratic.
constexpr std::size_t kHostileBytes = 8u << 20;

TEST(HtmlText, HostileLessThanFlood) {
  const std::string html(kHostileBytes, '<');
  HtmlTextOptions o;
  o.max_output_bytes = kHostileBytes;
  HtmlText r = HtmlToText(html, o);
  EXPECT_EQ(r.text, html);  // no tag starts with "<<": every '<' is text
  EXPECT_FALSE(r.truncated);
}

TEST(HtmlText, HostileUnclosedTagsAndQuotes) {
  std::string html;
  while (html.size() < kHostileBytes) html += "<a href=\"x <b onclick='y ";
  // No '>' anywhere: the first tag runs to the end of the input.
  EXPECT_EQ(Text("before " + html), "before");
  std::string quoted = "before <p title=\"";
  while (quoted.size() < kHostileBytes) quoted += "<b>x</b> ";
  EXPECT_EQ(Text(quoted + "\n"), "before");  // a quote never closed swallows the rest
  std::string tags;
  while (tags.size() < kHostileBytes) tags += "<div ";
  EXPECT_EQ(Text("kept" + tags), "kept");  // one tag, never closed, runs to the end
}

TEST(HtmlText, HostileDeepNesting) {
  std::string html;
  const std::size_t depth = kHostileBytes / 16;
  for (std::size_t k = 0; k < depth; ++k) html += "<div><ul><li><b>";
  html += "deep";
  for (std::size_t k = 0; k < depth; ++k) html += "</b></li></ul></div>";
  HtmlText r = HtmlToText(html);
  // Indentation stops at its cap however deep the lists go.
  EXPECT_EQ(r.text, std::string(2 * 6, ' ') + "- deep");
}

TEST(HtmlText, HostileScriptOpenersAndComments) {
  std::string html = "start";
  while (html.size() < kHostileBytes) html += "<script>x</scrip";  // never a real end
  EXPECT_EQ(Text(html), "start");
  std::string comments = "start";
  while (comments.size() < kHostileBytes) comments += "<!-- -- ->";
  EXPECT_EQ(Text(comments), "start");
  std::string many = "start";
  while (many.size() < kHostileBytes) many += "<script></script>x";
  const std::string text = Text(many);
  EXPECT_EQ(text.substr(0, 6), "startx");
  EXPECT_EQ(text.find_first_not_of('x', 5), std::string::npos);
}

TEST(HtmlText, HostileReferences) {
  std::string html;
  while (html.size() < kHostileBytes) html += "&#";
  html += std::string(1 << 20, '9') + ";";  // a million digits: U+FFFD, not an overflow
  HtmlTextOptions o;
  o.max_output_bytes = 2 * kHostileBytes;
  const std::string text = HtmlToText(html, o).text;
  EXPECT_EQ(text.size(), (kHostileBytes / 2 - 1) * 2 + 3);
  EXPECT_EQ(text.substr(text.size() - 3), "\xef\xbf\xbd");
  std::string amps(kHostileBytes, '&');
  EXPECT_EQ(HtmlToText(amps, o).text, amps);
}

TEST(HtmlText, HostileOutputStaysCapped) {
  std::string html;
  while (html.size() < kHostileBytes) html += "<p>para</p><br><li>";
  HtmlText r = HtmlToText(html);
  EXPECT_TRUE(r.truncated);
  EXPECT_LE(r.text.size(), std::size_t{1} << 20);
}

}  // namespace
}  // namespace cordon
