// The page template: CSS, body markup and script of the HTML report. They live in
// attnum/report/assets/ (page.css, page.html, page.js) and are compiled into the tool, so the
// installed tool is self-contained (the Vega runtime is inlined at run time by page.cpp): the
// build turns each file into a byte list in <build>/generated/attnum/report/assets/<file>.inc
// (cmake/embed_asset.cmake), regenerated whenever the file changes. The functions return the
// files' exact bytes (the CSP hash of the script is computed from them in page.cpp).
// The script only displays, filters and exports: every number it shows comes from the embedded
// JSON (the illustration's numbers from illustrate.cpp, the rest from the result files).
#include "attnum/report/page.h"

namespace attnum::report {

const char* page_css() {
  static constexpr unsigned char bytes[] = {
#include "attnum/report/assets/page.css.inc"
  };
  return reinterpret_cast<const char*>(bytes);
}

const char* page_body() {
  static constexpr unsigned char bytes[] = {
#include "attnum/report/assets/page.html.inc"
  };
  return reinterpret_cast<const char*>(bytes);
}

const char* page_js() {
  static constexpr unsigned char bytes[] = {
#include "attnum/report/assets/page.js.inc"
  };
  return reinterpret_cast<const char*>(bytes);
}

}  // namespace attnum::report
