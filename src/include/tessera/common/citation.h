// A paper a method follows, named once beside the method's code: the short form a methods text cites ("Wu 2012") and
// the reference as a reference list prints it. The pipeline's methods text (tessera/pipeline/methods_text.h) and the
// registry's networks cite from these.
#pragma once

#include <string_view>

namespace tessera {

struct Citation {
  std::string_view cite;       // "Wu et al. 2012"
  std::string_view reference;  // authors, title, journal year;volume:pages
};

}  // namespace tessera
