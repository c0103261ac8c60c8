// Median and spread of repeated measurements.
#pragma once
#include <vector>

namespace umscope {

struct Summary {
  int n = 0;
  double median = 0, min = 0, max = 0, mean = 0;
  // (max - min) / median: the relative spread the report flags above 5%.
  double spread() const { return median != 0 ? (max - min) / median : 0; }
};

Summary summarize(std::vector<double> samples);

}  // namespace umscope
