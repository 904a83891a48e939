// The record of the registered value types (value_types.cpp), for the generated TypeScript declarations.
#pragma once

#include <emscripten/val.h>

namespace tessera::js {

// [{name, doc, tuple, fields: [{name, type, doc}]}]: every value type register_value_types() registered, in order, with
// its JS name and each field's name, TypeScript type and doc (a tuple's fields are its unnamed elements).
// Precondition: register_value_types() has run (EMSCRIPTEN_BINDINGS).
emscripten::val value_types_record();

}  // namespace tessera::js
