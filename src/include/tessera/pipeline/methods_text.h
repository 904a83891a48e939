// A pipeline run's methods text: every step in the order it ran (brain mask, echo fit with unwrapping, background
// removal, inversion, SWI and minIP, R2*), the parameters it ran with and the paper of each method, cited from the one
// place each paper is named (tessera/common/citation.h constants beside each method's code, MethodInfo::papers, the
// registry's networks), with the numbered reference list.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/pipeline/pipeline.h"

namespace tessera {

struct MethodsStep {
  std::string stage;  // "brain mask", "echo fit", "unwrapping", "background removal", "inversion", "SWI", "minIP", "R2*"
  std::string title;  // the method as people read it: "V-SHARP", "RTS", "ARLO"
  // The parameters it ran with (defaults filled in), as (schema name, value with its unit).
  std::vector<std::pair<std::string, std::string>> parameters;
  std::vector<unsigned> references;  // 1-based numbers in MethodsText::references
  std::string sentence;              // the step in words, its references as [n]
};

struct MethodsText {
  std::vector<MethodsStep> steps;
  std::vector<std::string> references;  // numbered in order of first citation
  std::string text;                     // the paragraph: the steps' sentences in order
};

// The methods text of a pipeline request, run with (mask_given) or without a given mask. network: the registry id of
// the network that inverted the local field (empty: the request's method, or none). Parameters come from request.
// network, when not empty, is a registry id (else Error InvalidArgument).
MethodsText pipeline_methods_text(const PipelineRequest& request, bool mask_given, std::string_view network = {});

}  // namespace tessera
