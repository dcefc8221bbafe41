#include "policies/api/registry.h"

#include <gtest/gtest.h>

#include "policies/builtin.h"

namespace faultline {
namespace {

TEST(Params, DefaultsOverridesAndRangeErrors) {
  std::vector<ParamSpec> specs{{"interval_s", "", "s", 1800, 1, 1e6}};
  Params p;
  EXPECT_FALSE(Params::resolve(specs, {}, &p));
  EXPECT_EQ(p.get("interval_s"), 1800);
  EXPECT_FALSE(Params::resolve(specs, {{"interval_s", 60}}, &p));
  EXPECT_EQ(p.get("interval_s"), 60);
  auto err = Params::resolve(specs, {{"interval_s", 0}}, &p);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("out of range"), std::string::npos);
  err = Params::resolve(specs, {{"intervl_s", 5}}, &p);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("unknown parameter 'intervl_s'"), std::string::npos);
}

TEST(Registry, BuiltinStacksAreRegisteredByName) {
  Registry r = policies::builtin_registry();
  ASSERT_NE(r.find("requeue"), nullptr);
  ASSERT_NE(r.find("oracle"), nullptr);
  EXPECT_EQ(r.find("nonexistent"), nullptr);
  Params p;
  ASSERT_FALSE(Params::resolve(r.find("requeue")->params, {}, &p));
  auto pol = r.make("requeue", p);
  EXPECT_EQ(pol->info().name, "requeue");
}

}  // namespace
}  // namespace faultline
