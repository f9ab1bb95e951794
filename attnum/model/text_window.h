#pragma once
// Token windows from a book's own text (the study's loss and captures): the Project Gutenberg
// header and licence, and the book's front matter, are skipped; windows are taken from the body in
// order, each at a recorded byte range of the file.
//
// The rule (body_range):
//   1. When the file holds a line starting with "*** START OF" (Project Gutenberg's marker), the
//      text starts after that line, else at byte 0.
//   2. With the marker, or when the file's first non-blank line starts with "Produced by" (a
//      Project Gutenberg text whose header was cut off, as Debian's copies of the default books
//      are), the front matter (title page, contents, preface) is skipped: the body starts at the
//      first line, after the marker, that is a heading: written in capitals (at least one letter,
//      no lower-case letter) and holding one of the words CHAPTER, ADVENTURE, BOOK or PART
//      ("CHAPTER I", "ADVENTURE I. A SCANDAL IN BOHEMIA", "THE FIRST BOOK OF OPTICKS"). Without
//      such a line the body starts at step 1's start. Any other file is used from its start.
//   3. The body ends before the first line starting with "*** END OF" after the start (else at
//      the end of the file).
// Windows (take_windows): window 0 starts at the body's start. A window's tokens are the first
// tokens of the tokenizer's encoding of bytes [byte_start, byte_end) (after the model's BOS when it
// has one): byte_end is the end of the word (up to the next whitespace) in which the shortest
// range from byte_start that encodes to enough tokens ends. The next window starts at the first
// word after byte_end, so windows never share bytes.
#include <string>
#include <string_view>
#include <vector>

#include "attnum/model/tokenizer.h"

namespace attnum::model {

struct byte_range {
  size_t begin = 0, end = 0;
};

/// The body of a text by the rule above: [begin, end) in bytes.
byte_range body_range(std::string_view text);

struct text_window {
  size_t byte_start = 0, byte_end = 0;  ///< the bytes whose tokens the window holds
  std::vector<int> ids;                 ///< bos (when >= 0), then the tokens: n_tokens + 1 in all
};

/// `count` consecutive windows of n_tokens + 1 ids each (n_tokens inputs, their last label) from
/// the body of `text`; `what` names the text in the error thrown when the body is too short.
std::vector<text_window> take_windows(std::string_view text, const tokenizer& tok, int bos, int n_tokens, int count,
                                      const std::string& what);

/// `{"byte_start": B, "byte_end": E}`: the capture metadata's text_window.
std::string text_window_json(const text_window& w);

/// Windows per text so that the loss sees about `labels` labels over n_texts texts of
/// n_tokens each: ceil(labels / (n_texts * n_tokens)), at least 1.
int windows_per_text(int labels, int n_texts, int n_tokens);

}  // namespace attnum::model
