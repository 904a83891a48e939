#include "tessera/common/morphology.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "support.h"

namespace {

using tessera::Dims3;
using tessera::Geometry;
using tessera::MaskBox;

// The box by its definition: the least and greatest coordinate of a set voxel along each axis, by a scan per axis.
MaskBox brute_box(const Geometry& g, const std::vector<uint8_t>& m) {
  MaskBox b;
  for (uint8_t v : m) b.voxels += v ? 1 : 0;
  if (b.voxels == 0) return b;
  for (int a = 0; a < 3; ++a) {
    b.lo[a] = g.dims[a];
    b.hi[a] = 0;
    for (int64_t c = 0; c < g.dims[a]; ++c) {
      bool any = false;
      for (int64_t z = 0; z < g.dims[2]; ++z)
        for (int64_t y = 0; y < g.dims[1]; ++y)
          for (int64_t x = 0; x < g.dims[0]; ++x) {
            const int64_t p[3] = {x, y, z};
            if (p[a] == c && m[g.index(x, y, z)]) any = true;
          }
      if (any) {
        if (b.lo[a] == g.dims[a]) b.lo[a] = c;
        b.hi[a] = c + 1;
      }
    }
  }
  return b;
}

TEST(Morphology, MaskBoxIsTheBoundingBoxOfTheSetVoxels) {
  const Geometry g = tessera::test::geometry(9, 7, 5);
  std::vector<uint8_t> m(g.voxel_count(), 0);
  MaskBox empty = tessera::mask_box(g, m);
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.lo, (Dims3{0, 0, 0}));
  EXPECT_EQ(empty.hi, (Dims3{0, 0, 0}));
  m[g.index(3, 2, 4)] = 1;
  const MaskBox one = tessera::mask_box(g, m);
  EXPECT_EQ(one.lo, (Dims3{3, 2, 4}));
  EXPECT_EQ(one.hi, (Dims3{4, 3, 5}));
  EXPECT_EQ(one.ext(), (Dims3{1, 1, 1}));
  EXPECT_EQ(one.voxels, 1u);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::fill(m.begin(), m.end(), 0);
    const int set = 1 + trial % 6;
    for (int k = 0; k < set; ++k) m[rng() % m.size()] = static_cast<uint8_t>(1 + rng() % 255);
    const MaskBox want = brute_box(g, m), got = tessera::mask_box(g, m);
    EXPECT_EQ(got.lo, want.lo) << trial;
    EXPECT_EQ(got.hi, want.hi) << trial;
    EXPECT_EQ(got.voxels, want.voxels) << trial;
  }
}

TEST(Morphology, BoxWhereTakesAnyPredicate) {
  const Geometry g = tessera::test::geometry(6, 5, 4);
  // x + y + z == 3: the voxels from (3,0,0), (0,3,0) and (0,0,3) span [0, 4) on each axis.
  const MaskBox b = tessera::box_where(g, [&](uint64_t i) {
    const int64_t x = static_cast<int64_t>(i) % 6, y = static_cast<int64_t>(i) / 6 % 5, z = static_cast<int64_t>(i) / 30;
    return x + y + z == 3;
  });
  EXPECT_EQ(b.lo, (Dims3{0, 0, 0}));
  EXPECT_EQ(b.hi, (Dims3{4, 4, 4}));
  EXPECT_EQ(b.voxels, 10u);  // the compositions of 3 into three parts
}

}  // namespace
