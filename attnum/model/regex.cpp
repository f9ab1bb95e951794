// The split-pattern regex engine (regex.h): a recursive-descent parser to a small tree, compiled to
// a backtracking program (set / jump / split / match, and look / atomic sub-programs).
#include "attnum/model/regex.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "attnum/core/error.h"
#include "attnum/model/utf8.h"

namespace attnum::model {
namespace {
#include "attnum/model/unicode_tables.inc"

using range_list = std::vector<std::pair<char32_t, char32_t>>;
constexpr char32_t kMaxCp = 0x10FFFF;
constexpr int kMaxDepth = 64;     // group nesting
constexpr int kMaxRepeat = 1000;  // {n,m} bounds
constexpr size_t kMaxProgram = 1 << 16;

range_list normalized(range_list r) {
  std::sort(r.begin(), r.end());
  range_list out;
  for (const auto& [a, b] : r) {
    if (!out.empty() && a <= out.back().second + 1)
      out.back().second = std::max(out.back().second, b);
    else
      out.emplace_back(a, b);
  }
  return out;
}

range_list complement(const range_list& r) {  // r normalized
  range_list out;
  char32_t next = 0;
  for (const auto& [a, b] : r) {
    if (a > next) out.emplace_back(next, a - 1);
    next = b + 1;
  }
  if (next <= kMaxCp) out.emplace_back(next, kMaxCp);
  return out;
}

// The code points of the categories in `mask` (bit k = kCategoryNames[k]).
range_list category_ranges(uint32_t mask) {
  range_list out;
  const size_t n = std::size(kCategoryRuns);
  for (size_t k = 0; k < n; ++k)
    if ((mask >> kCategoryRuns[k].second) & 1)
      out.emplace_back(kCategoryRuns[k].first, k + 1 < n ? kCategoryRuns[k + 1].first - 1 : kMaxCp);
  return normalized(out);
}

// A category name of \p{..}: one or two letters (L, Lu, ...); 0 when unknown.
uint32_t category_mask(const std::string& name) {
  uint32_t m = 0;
  for (int k = 0; k < int(std::size(kCategoryNames)); ++k) {
    const char* c = kCategoryNames[k];
    if (name == c || (name.size() == 1 && name[0] == c[0])) m |= 1u << k;
  }
  return m;
}
uint32_t cat(const char* n) { return category_mask(n); }

range_list space_ranges() {  // Oniguruma's Unicode \s: U+0009-000D, U+0085, Zs, Zl, Zp
  range_list r = category_ranges(cat("Z"));
  r.emplace_back(0x09, 0x0D);
  r.emplace_back(0x85, 0x85);
  return normalized(r);
}

// Adds every code point with the same simple case fold as a member (kFoldPairs).
range_list case_closed(const range_list& r) {
  auto in = [&](char32_t c) {
    auto it = std::upper_bound(r.begin(), r.end(), c, [](char32_t v, const auto& p) { return v < p.first; });
    return it != r.begin() && c <= std::prev(it)->second;
  };
  std::vector<char32_t> keys;
  for (const auto& [c, key] : kFoldPairs)
    if (in(c) || in(key)) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  range_list out = r;
  for (const auto& [c, key] : kFoldPairs)
    if (std::binary_search(keys.begin(), keys.end(), key)) out.emplace_back(c, c), out.emplace_back(key, key);
  return normalized(out);
}

struct node {
  enum kind { empty, set, cat, alt, rep, atomic, look } k = empty;
  range_list chars;  // set
  std::vector<node> kids;
  int min = 0, max = 0;  // rep: max < 0 is unbounded
  bool greedy = true, neg = false;
};

bool nullable(const node& n) {
  switch (n.k) {
    case node::empty:
    case node::look:
      return true;
    case node::set:
      return false;
    case node::cat:
      return std::all_of(n.kids.begin(), n.kids.end(), nullable);
    case node::alt:
      return std::any_of(n.kids.begin(), n.kids.end(), nullable);
    case node::rep:
      return n.min == 0 || nullable(n.kids[0]);
    case node::atomic:
      return nullable(n.kids[0]);
  }
  return true;
}

class parser {
 public:
  explicit parser(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
      const utf8_step u = decode_utf8_at(s, i);
      if (!u.ok) fail("regex: invalid UTF-8 at byte {}", i);
      p_.push_back(u.cp);
      i += u.len;
    }
  }
  node parse() {
    bool icase = false;
    node n = parse_alt(icase, 0);
    if (i_ < p_.size()) refuse("unmatched ')'");
    return n;
  }

 private:
  [[noreturn]] void refuse(const std::string& what) const { fail("regex: {} at offset {} not supported", what, i_); }
  bool more() const { return i_ < p_.size(); }
  char32_t peek(size_t k = 0) const { return i_ + k < p_.size() ? p_[i_ + k] : 0; }
  bool at(char32_t c) const { return more() && p_[i_] == c; }

  node parse_alt(bool& icase, int depth) {
    if (depth > kMaxDepth) refuse(fmt::format("groups nested deeper than {}", kMaxDepth));
    node n;
    n.k = node::alt;
    n.kids.push_back(parse_cat(icase, depth));
    while (at('|')) {
      ++i_;
      n.kids.push_back(parse_cat(icase, depth));
    }
    if (n.kids.size() == 1) return std::move(n.kids[0]);
    return n;
  }

  node parse_cat(bool& icase, int depth) {
    node n;
    n.k = node::cat;
    while (more() && !at('|') && !at(')')) {
      const size_t start = i_;
      std::optional<node> a = parse_atom(icase, depth);
      if (!a) {  // an isolated (?i) or (?-i): Oniguruma makes the rest of the group, every
                 // alternative after it included, a group with that option (ab(?i)c|d = ab(?i:c|d))
        n.kids.push_back(parse_alt(icase, depth + 1));
        break;
      }
      node atom = std::move(*a);
      if (quantifier_ahead()) {
        if (atom.k == node::look) {
          i_ = start;
          refuse("a quantifier on a lookahead");
        }
        atom = parse_quantifier(std::move(atom));
        if (quantifier_ahead()) refuse("a quantifier on a quantifier");
      }
      n.kids.push_back(std::move(atom));
    }
    if (n.kids.empty()) return node{};
    if (n.kids.size() == 1) return std::move(n.kids[0]);
    return n;
  }

  bool quantifier_ahead() const { return at('?') || at('*') || at('+') || at('{'); }

  int number() {
    if (!(peek() >= '0' && peek() <= '9')) refuse("'{' that does not start a {n}, {n,} or {n,m} quantifier");
    long v = 0;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > kMaxRepeat) refuse(fmt::format("a repeat count above {}", kMaxRepeat));
      ++i_;
    }
    return int(v);
  }

  node parse_quantifier(node atom) {
    node r;
    r.k = node::rep;
    const char32_t q = p_[i_++];
    bool braces = false;
    if (q == '?')
      r.min = 0, r.max = 1;
    else if (q == '*')
      r.min = 0, r.max = -1;
    else if (q == '+')
      r.min = 1, r.max = -1;
    else {
      braces = true;
      r.min = number();
      r.max = r.min;
      if (at(',')) {
        ++i_;
        r.max = at('}') ? -1 : number();
      }
      if (!at('}')) refuse("'{' that does not start a {n}, {n,} or {n,m} quantifier");
      ++i_;
      if (r.max >= 0 && r.max < r.min) refuse("a {n,m} quantifier with m < n");
    }
    bool possessive = false;
    if (at('?')) {
      ++i_;
      r.greedy = false;
    } else if (at('+')) {
      if (braces) refuse("'+' after {n,m} (a repeat of a repeat in Oniguruma's Ruby syntax)");
      ++i_;
      possessive = true;
    }
    if (r.max < 0 && nullable(atom)) refuse("an unbounded repeat of an expression that can match empty");
    r.kids.push_back(std::move(atom));
    if (!possessive) return r;
    node a;
    a.k = node::atomic;
    a.kids.push_back(std::move(r));
    return a;
  }

  node set_node(range_list r, bool icase) {
    node n;
    n.k = node::set;
    r = normalized(std::move(r));
    n.chars = icase ? case_closed(r) : std::move(r);
    return n;
  }

  std::optional<node> parse_atom(bool& icase, int depth) {
    const char32_t c = p_[i_];
    switch (c) {
      case '(':
        return parse_group(icase, depth);
      case '[': {
        ++i_;
        return set_node(parse_class(icase), false);  // parse_class folds case itself
      }
      case '.':
        ++i_;
        return set_node(complement({{'\n', '\n'}}), false);
      case '^':
      case '$':
        refuse(fmt::format("the anchor '{}'", char(c)));
      case '*':
      case '+':
      case '?':
      case '{':
        refuse(fmt::format("a quantifier '{}' with nothing to repeat", char(c)));
      case '\\': {
        range_list r;
        escape(r, false);
        return set_node(std::move(r), icase);
      }
      default:
        ++i_;
        return set_node({{c, c}}, icase);
    }
  }

  std::optional<node> parse_group(bool& icase, int depth) {
    ++i_;  // '('
    bool inner_icase = icase;
    node n;
    bool wrap = false;  // n.kind wraps the group's expression
    if (at('?')) {
      ++i_;
      if (at(':')) {
        ++i_;
      } else if (at('=') || at('!')) {
        n.k = node::look, n.neg = at('!'), wrap = true;
        ++i_;
      } else if (at('>')) {
        n.k = node::atomic, wrap = true;
        ++i_;
      } else if (at('<')) {
        refuse(peek(1) == '=' || peek(1) == '!' ? "a lookbehind" : "a named group");
      } else if (at('i') || at('-')) {
        const bool on = !at('-');
        if (!on) ++i_;
        if (!at('i')) refuse("a group option other than i");
        ++i_;
        if (at(')')) {  // (?i): to the end of the enclosing group (parse_cat)
          ++i_;
          icase = on;
          return std::nullopt;
        }
        if (!at(':')) refuse("a group option other than i");
        ++i_;
        inner_icase = on;
      } else {
        refuse(fmt::format("the group kind '(?{}'", more() ? std::string(1, char(peek() < 128 ? peek() : '?')) : ""));
      }
    }
    node inner = parse_alt(inner_icase, depth + 1);
    if (!at(')')) refuse("a group without its ')'");
    ++i_;
    if (!wrap) return inner;
    n.kids.push_back(std::move(inner));
    return n;
  }

  static int hex(char32_t c) {
    if (c >= '0' && c <= '9') return int(c - '0');
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return int((c | 0x20) - 'a' + 10);
    return -1;
  }
  char32_t hex_digits(int count) {
    uint32_t v = 0;
    for (int k = 0; k < count; ++k) {
      if (hex(peek()) < 0) refuse("a hex escape without its digits");
      v = v * 16 + uint32_t(hex(p_[i_++]));
    }
    return v;
  }

  // An escape at p_[i_] == '\\': adds its code points to r; returns true for a single literal
  // code point (a range end), false for a class (\s, \p{L}, ...).
  bool escape(range_list& r, bool in_class) {
    ++i_;
    if (!more()) refuse("a trailing '\\'");
    const char32_t c = p_[i_++];
    auto lit = [&](char32_t v) {
      r.emplace_back(v, v);
      return true;
    };
    auto cls = [&](range_list add) {
      r.insert(r.end(), add.begin(), add.end());
      return false;
    };
    switch (c) {
      case 'r':
        return lit('\r');
      case 'n':
        return lit('\n');
      case 't':
        return lit('\t');
      case 'f':
        return lit('\f');
      case 'v':
        return lit('\v');
      case 'a':
        return lit(0x07);
      case 'e':
        return lit(0x1B);
      case 's':
        return cls(space_ranges());
      case 'S':
        return cls(complement(space_ranges()));
      case 'd':
        return cls(category_ranges(cat("Nd")));
      case 'D':
        return cls(complement(category_ranges(cat("Nd"))));
      case 'w':
        return cls(category_ranges(cat("L") | cat("M") | cat("N") | cat("Pc")));
      case 'W':
        return cls(complement(category_ranges(cat("L") | cat("M") | cat("N") | cat("Pc"))));
      case 'p':
      case 'P': {
        std::string name;
        if (at('{')) {
          ++i_;
          bool neg = false;
          if (at('^')) neg = true, ++i_;
          while (more() && !at('}') && name.size() < 32) name += char(peek() < 128 ? peek() : '?'), ++i_;
          if (!at('}')) refuse("a \\p{ without its '}'");
          ++i_;
          if (neg) name = "^" + name;
        } else if (more() && peek() < 128) {
          name = std::string(1, char(p_[i_++]));
        }
        const bool negated = (c == 'P') != (!name.empty() && name[0] == '^');
        const std::string bare = !name.empty() && name[0] == '^' ? name.substr(1) : name;
        const uint32_t m = category_mask(bare);
        if (m == 0) refuse(fmt::format("the property \\p{{{}}} (only general categories such as L, Lu, N, P)", bare));
        const range_list rr = category_ranges(m);
        return cls(negated ? complement(rr) : rr);
      }
      case 'x': {
        if (at('{')) {
          ++i_;
          uint32_t v = 0;
          int digits = 0;
          while (hex(peek()) >= 0 && digits < 8) v = v * 16 + uint32_t(hex(p_[i_++])), ++digits;
          if (digits == 0 || !at('}') || v > kMaxCp) refuse("a malformed \\x{...} escape");
          ++i_;
          return lit(v);
        }
        return lit(hex_digits(2));
      }
      case 'u':
        return lit(hex_digits(4));
      case 'b':
        if (in_class) return lit(0x08);
        [[fallthrough]];
      case 'B':
      case 'A':
      case 'z':
      case 'Z':
      case 'G':
        refuse(fmt::format("the anchor '\\{}'", char(c)));
      default:
        if (c < 128 && std::isalnum(int(c))) refuse(fmt::format("the escape '\\{}'", char(c)));
        return lit(c);
    }
  }

  // A class after its '[': items up to the closing ']'.
  range_list parse_class(bool icase) {
    bool neg = false;
    if (at('^')) neg = true, ++i_;
    range_list r;
    bool first = true;
    while (true) {
      if (!more()) refuse("a class without its ']'");
      if (at(']') && !first) break;
      if (at('[')) refuse("a nested class or a POSIX bracket");
      if (at('&') && peek(1) == '&') refuse("a class intersection '&&'");
      first = false;
      char32_t lo;
      if (at('\\')) {
        range_list one;
        if (!escape(one, true)) {
          r.insert(r.end(), one.begin(), one.end());
          if (at('-') && peek(1) != ']') refuse("a range that starts at a class such as \\s");
          continue;
        }
        lo = one[0].first;
      } else {
        lo = p_[i_++];
      }
      char32_t hi = lo;
      if (at('-') && peek(1) != ']' && peek(1) != 0) {
        ++i_;
        if (at('[')) refuse("a nested class or a POSIX bracket");
        if (at('\\')) {
          range_list one;
          if (!escape(one, true)) refuse("a range that ends at a class such as \\s");
          hi = one[0].first;
        } else {
          hi = p_[i_++];
        }
        if (hi < lo) refuse("a class range whose end precedes its start");
      }
      r.emplace_back(lo, hi);
    }
    ++i_;  // ']'
    r = normalized(std::move(r));
    if (icase) r = case_closed(r);  // Oniguruma folds case before it negates
    return neg ? complement(r) : r;
  }

  std::u32string p_;
  size_t i_ = 0;
};

class compiler {
 public:
  compiler(std::vector<regex::inst>& prog, std::vector<regex::char_set>& sets) : prog_(prog), sets_(sets) {}

  void compile_program(const node& root) {
    pending_.push_back({-1, &root});
    for (size_t k = 0; k < pending_.size(); ++k) {
      const auto [at, n] = pending_[k];
      if (at >= 0) prog_[size_t(at)].x = int(prog_.size());
      emit(*n);
      push({regex::op::match});
    }
  }

 private:
  int push(regex::inst in) {
    if (prog_.size() >= kMaxProgram)
      fail("regex: the pattern compiles to more than {} instructions, not supported", kMaxProgram);
    prog_.push_back(in);
    return int(prog_.size()) - 1;
  }
  int here() const { return int(prog_.size()); }

  void emit(const node& n) {
    switch (n.k) {
      case node::empty:
        return;
      case node::set: {
        auto [it, fresh] = set_index_.try_emplace(n.chars, int(sets_.size()));  // one copy of each set
        if (fresh) {
          regex::char_set s;
          s.ranges = n.chars;
          for (const auto& [a, b] : s.ranges)
            for (char32_t c = a; c <= b && c < 128; ++c) s.ascii[c >> 6] |= uint64_t{1} << (c & 63);
          sets_.push_back(std::move(s));
        }
        push({regex::op::set, false, it->second});
        return;
      }
      case node::cat:
        for (const node& k : n.kids) emit(k);
        return;
      case node::alt: {
        std::vector<int> to_end;
        for (size_t k = 0; k < n.kids.size(); ++k) {
          if (k + 1 == n.kids.size()) {
            emit(n.kids[k]);
            break;
          }
          const int sp = push({regex::op::split});
          prog_[size_t(sp)].x = here();
          emit(n.kids[k]);
          to_end.push_back(push({regex::op::jump}));
          prog_[size_t(sp)].y = here();
        }
        for (int j : to_end) prog_[size_t(j)].x = here();
        return;
      }
      case node::rep: {
        for (int k = 0; k < n.min; ++k) emit(n.kids[0]);
        if (n.max < 0) {
          const int sp = push({regex::op::split});
          emit(n.kids[0]);
          push({regex::op::jump, false, sp});
          branch(sp, sp + 1, here(), n.greedy);
          return;
        }
        std::vector<int> splits;
        for (int k = n.min; k < n.max; ++k) {
          splits.push_back(push({regex::op::split}));
          emit(n.kids[0]);
        }
        for (int sp : splits) branch(sp, sp + 1, here(), n.greedy);
        return;
      }
      case node::atomic:
      case node::look: {
        const int at = push({n.k == node::look ? regex::op::look : regex::op::atomic, n.neg});
        pending_.push_back({at, &n.kids[0]});
        return;
      }
    }
  }
  // A split at sp between `body` and `skip`, the preferred first.
  void branch(int sp, int body, int skip, bool greedy) {
    prog_[size_t(sp)].x = greedy ? body : skip;
    prog_[size_t(sp)].y = greedy ? skip : body;
  }

  std::vector<regex::inst>& prog_;
  std::vector<regex::char_set>& sets_;
  std::vector<std::pair<int, const node*>> pending_;  // look/atomic instruction, its expression
  std::map<range_list, int> set_index_;
};

}  // namespace

int unicode_category(char32_t c) {
  if (c > kMaxCp) return int(std::size(kCategoryNames)) - 1;  // Cn
  auto it = std::upper_bound(std::begin(kCategoryRuns), std::end(kCategoryRuns), c,
                             [](char32_t v, const auto& p) { return v < p.first; });
  return std::prev(it)->second;
}

const char* unicode_category_name(int k) { return kCategoryNames[k]; }

bool regex::char_set::contains_slow(char32_t c) const {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), c, [](char32_t v, const auto& p) { return v < p.first; });
  return it != ranges.begin() && c <= std::prev(it)->second;
}

regex::regex(std::string_view pattern) {
  parser p(pattern);
  const node root = p.parse();
  nullable_ = nullable(root);
  compiler(prog_, sets_).compile_program(root);
  // First-character filters for the splits (a small program only: the analysis walks the
  // program once per split). Branch x must consume a code point before anything else happens.
  if (prog_.size() > 4096) return;
  std::vector<int> seen(prog_.size(), -1), todo;
  for (size_t k = 0; k < prog_.size(); ++k) {
    if (prog_[k].o != op::split) continue;
    uint64_t first[2] = {0, 0};
    bool ok = true, non_ascii = false;
    todo.assign(1, prog_[k].x);
    while (ok && !todo.empty()) {
      const int pc = todo.back();
      todo.pop_back();
      if (seen[size_t(pc)] == int(k)) continue;
      seen[size_t(pc)] = int(k);
      const inst& in = prog_[size_t(pc)];
      switch (in.o) {
        case op::set: {
          const char_set& cs = sets_[size_t(in.x)];
          if (!cs.ranges.empty() && cs.ranges.back().second >= 128) non_ascii = true;
          first[0] |= cs.ascii[0], first[1] |= cs.ascii[1];
          break;
        }
        case op::jump:
          todo.push_back(in.x);
          break;
        case op::split:
          todo.push_back(in.x), todo.push_back(in.y);
          break;
        default:
          ok = false;  // match, look, atomic: no first-character bound
      }
    }
    prog_[k].x_filter = ok;
    prog_[k].x_first_non_ascii = non_ascii;
    prog_[k].x_first[0] = first[0], prog_[k].x_first[1] = first[1];
  }
}

// The backtracking run of one program from one position: a stack of (instruction, position)
// alternatives, and a visited set stamped with this run's generation.
class regex_matcher {
 public:
  regex_matcher(const regex& re, const std::vector<char32_t>& text) : re_(re), t_(text) {}

  // Runs the program at pc from position `start`; on a match sets `end` and returns true.
  bool run(int pc0, size_t start, size_t& end) { return run_from(pc0, start, start, new_generation(), end); }

  // The same, with the visited set of generation `gen`, whose rows count positions from
  // `origin` <= start: the attempts of one left-to-right scan share it (a state that failed
  // from an earlier start fails from a later one: there are no captures or anchors), so a whole
  // scan costs at most instructions x positions steps while the set lasts.
  bool run_from(int pc0, size_t start, size_t origin, uint32_t gen, size_t& end) {
    const size_t base = stack_.size();
    const size_t np = re_.prog_.size(), n = t_.size();
    stack_.emplace_back(pc0, start);
    while (stack_.size() > base) {
      auto [pc, pos] = stack_.back();
      stack_.pop_back();
      while (true) {
        // The visited set: rows of np stamps per position from start, grown on demand.
        const size_t row = pos - origin;
        if (row >= rows_) grow(row);
        if (row < rows_) {
          uint32_t& v = visited_[row * np + size_t(pc)];
          if (v == gen) break;
          v = gen;
        }
        const regex::inst& in = re_.prog_[size_t(pc)];
        bool ok = true;
        switch (in.o) {
          case regex::op::set:
            if (pos < n && re_.sets_[size_t(in.x)].contains(t_[pos]))
              ++pos, ++pc;
            else
              ok = false;
            break;
          case regex::op::jump:
            pc = in.x;
            break;
          case regex::op::split:
            if (in.x_filter) {  // skip branch x when it cannot start at t_[pos]
              const bool skip = pos == n         ? true
                                : t_[pos] >= 128 ? !in.x_first_non_ascii
                                                 : !((in.x_first[t_[pos] >> 6] >> (t_[pos] & 63)) & 1);
              if (skip) {
                pc = in.y;
                break;
              }
            }
            stack_.emplace_back(in.y, pos);
            pc = in.x;
            break;
          case regex::op::match:
            stack_.resize(base);
            end = pos;
            return true;
          case regex::op::look: {
            size_t e;
            if (run(in.x, pos, e) != in.neg)
              ++pc;
            else
              ok = false;
            break;
          }
          case regex::op::atomic: {
            size_t e;
            if (run(in.x, pos, e))
              pos = e, ++pc;
            else
              ok = false;
            break;
          }
        }
        if (!ok) break;
      }
    }
    return false;
  }

  uint32_t new_generation() {
    if (++gen_ == 0) {  // wrapped: forget every stamp
      std::fill(visited_.begin(), visited_.end(), 0);
      gen_ = 1;
    }
    return gen_;
  }

 private:
  void grow(size_t row) {
    const size_t np = re_.prog_.size();
    constexpr size_t kMaxStamps = size_t{1} << 22;  // 16 MB of stamps at most
    size_t rows = std::max<size_t>(rows_ * 2, 64);
    while (rows <= row) rows *= 2;
    rows = std::min(rows, kMaxStamps / np);
    if (rows <= rows_) return;
    visited_.resize(rows * np, 0);
    rows_ = rows;
  }

  const regex& re_;
  const std::vector<char32_t>& t_;
  std::vector<std::pair<int, size_t>> stack_;
  std::vector<uint32_t> visited_;
  size_t rows_ = 0;
  uint32_t gen_ = 0;
};

namespace {
std::optional<regex::match> find_with(regex_matcher& m, size_t n, size_t from) {
  const uint32_t gen = m.new_generation();
  for (size_t s = from; s <= n; ++s) {
    size_t e;
    if (m.run_from(0, s, from, gen, e)) return regex::match{s, e};
  }
  return std::nullopt;
}
}  // namespace

std::optional<regex::match> regex::find(const std::vector<char32_t>& text, size_t from) const {
  regex_matcher m(*this, text);
  return find_with(m, text.size(), from);
}

void regex::find_all(const std::vector<char32_t>& text, std::vector<match>& out) const {
  regex_matcher m(*this, text);
  for (size_t from = 0; from <= text.size();) {
    const std::optional<match> hit = find_with(m, text.size(), from);
    if (!hit) break;
    out.push_back(*hit);
    from = hit->end > hit->begin ? hit->end : hit->end + 1;
  }
}

}  // namespace attnum::model
