// The book-window rule (model/text_window.h) on small synthetic texts with and without Project
// Gutenberg markers, with a tokenizer of one token per byte (so a window's bytes are its tokens).
#include <gtest/gtest.h>

#include <string>

#include "attnum/core/error.h"
#include "attnum/model/text_window.h"

using namespace attnum::model;

namespace {
class byte_tokenizer : public tokenizer {
 public:
  std::vector<int> encode(std::string_view t) const override {
    std::vector<int> ids;
    for (char c : t) ids.push_back(static_cast<unsigned char>(c));
    return ids;
  }
  std::string decode(int, int id) const override { return std::string(1, static_cast<char>(id)); }
  int size() const override { return 256; }
};

const std::string kHeader =
    "The Project Gutenberg EBook of A Tale, by Someone\r\n"
    "CHAPTER headings here do not count: before the marker\r\n"
    "*** START OF THIS PROJECT GUTENBERG EBOOK A TALE ***\r\n"
    "Produced by a volunteer\n\n"
    "A TALE\n  by Someone\n\nContents\n  Chapter I. The start ..... 3\n  CHAPTERS of life ..... 9\n\n"
    "PREFACE\n\nThis preface is front matter.\n\n";
const std::string kBody = "CHAPTER I\n\nOnce upon a time there was a tale told twice over and again.\n";
const std::string kFooter = "*** END OF THIS PROJECT GUTENBERG EBOOK A TALE ***\nlicence text\n";
}  // namespace

TEST(text_window_test, body_starts_at_the_first_heading_after_the_start_marker_and_ends_before_the_end_marker) {
  const std::string t = kHeader + kBody + kFooter;
  const byte_range r = body_range(t);
  EXPECT_EQ(r.begin, kHeader.size());  // "CHAPTER I", not "Chapter I." (lower case) nor "CHAPTERS"
  EXPECT_EQ(r.end, kHeader.size() + kBody.size());
}

TEST(text_window_test, other_heading_words_and_no_heading) {
  for (const char* h : {"ADVENTURE I. A SCANDAL IN BOHEMIA", "THE FIRST BOOK OF OPTICKS", "PART 1"}) {
    const std::string pre = "*** START OF IT ***\nTITLE PAGE\n\n";
    const std::string t = pre + h + "\n\nText.\n";
    EXPECT_EQ(body_range(t).begin, pre.size()) << h;
  }
  // a marker and no heading: right after the marker's line
  const std::string pre = "header\n*** START OF IT ***\n";
  EXPECT_EQ(body_range(pre + "just text\n").begin, pre.size());
  EXPECT_EQ(body_range(pre + "just text\n").end, (pre + "just text\n").size());
}

TEST(text_window_test, a_text_without_markers_is_used_from_its_start) {
  const std::string t = "A title\n\nCHAPTER I\n\nText text text.\n";
  const byte_range r = body_range(t);
  EXPECT_EQ(r.begin, 0u);
  EXPECT_EQ(r.end, t.size());
}

TEST(text_window_test, a_gutenberg_text_without_its_header_skips_its_front_matter) {
  const std::string pre = "\nProduced by a volunteer\n\nTHE TITLE\n\nCONTENTS\n  Chapter I. The start\n\n";
  const std::string t = pre + "CHAPTER I\n\nText text text.\n";
  const byte_range r = body_range(t);
  EXPECT_EQ(r.begin, pre.size());
  EXPECT_EQ(r.end, t.size());
  // without a heading: from the start
  EXPECT_EQ(body_range(std::string("Produced by a volunteer\n\nText.\n")).begin, 0u);
}

TEST(text_window_test, windows_follow_each_other_in_the_body_on_word_boundaries) {
  const std::string t = kHeader + kBody + kFooter;
  const byte_tokenizer tok;
  const auto ws = take_windows(t, tok, 1, 12, 3, "synthetic");
  ASSERT_EQ(ws.size(), 3u);
  EXPECT_EQ(ws[0].byte_start, kHeader.size());
  for (size_t k = 0; k < ws.size(); ++k) {
    const auto& w = ws[k];
    ASSERT_EQ(w.ids.size(), 13u);
    EXPECT_EQ(w.ids[0], 1);  // bos
    for (int i = 1; i < 13; ++i) EXPECT_EQ(w.ids[i], static_cast<unsigned char>(t[w.byte_start + i - 1])) << k;
    // byte_end: the end of the word holding the 12th byte
    size_t e = w.byte_start + 12;
    if (t[e - 1] != ' ' && t[e - 1] != '\n')
      while (e < t.size() && t[e] != ' ' && t[e] != '\n') ++e;
    EXPECT_EQ(w.byte_end, e) << k;
    EXPECT_LE(w.byte_end, kHeader.size() + kBody.size());
    if (k > 0) {
      EXPECT_GE(w.byte_start, ws[k - 1].byte_end);  // after the whitespace
      EXPECT_NE(t[w.byte_start], ' ');
      EXPECT_TRUE(t[w.byte_start - 1] == ' ' || t[w.byte_start - 1] == '\n');
    }
  }
  EXPECT_EQ(text_window_json(ws[0]), "{\"byte_start\": " + std::to_string(kHeader.size()) +
                                         ", \"byte_end\": " + std::to_string(ws[0].byte_end) + "}");
  // no bos: all 13 ids from the text
  const auto nb = take_windows(t, tok, -1, 12, 1, "synthetic");
  EXPECT_EQ(nb[0].ids[0], 'C');
  EXPECT_EQ(nb[0].ids.size(), 13u);
}

TEST(text_window_test, a_body_too_short_for_the_windows_is_an_error_naming_the_text) {
  const std::string t = kHeader + kBody + kFooter;
  const byte_tokenizer tok;
  try {
    take_windows(t, tok, 1, 40, 3, "synthetic.txt");
    FAIL() << "expected an error";
  } catch (const attnum::error& e) {
    EXPECT_NE(std::string(e.what()).find("synthetic.txt"), std::string::npos) << e.what();
  }
}

TEST(text_window_test, windows_per_text_reaches_the_labels) {
  EXPECT_EQ(windows_per_text(3072, 3, 512), 2);   // six 512-token windows
  EXPECT_EQ(windows_per_text(3072, 3, 1024), 1);  // three 1,024-token windows
  EXPECT_EQ(windows_per_text(3072, 1, 1024), 3);
  EXPECT_EQ(windows_per_text(3072, 3, 4096), 1);
}
