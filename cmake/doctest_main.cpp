// The one main() every doctest executable shares.
//
// CTest runs each test case alone (doctest_discover_tests passes
// --test-case=NAME). doctest itself exits 0 when that filter selects no
// case at all, so a name CTest could not pass through intact (CMake splits
// lists at ';', and a case named "a; b" became a test "a" that ran nothing
// and passed) would count as a pass. Here a --test-case filter that selects
// nothing is a failure, with a message saying why.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>

namespace {

int g_selected = -1;  // test cases that passed the filters (set at the end of the run)

struct SelectedCount : doctest::IReporter {
  explicit SelectedCount(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    g_selected = static_cast<int>(stats.numTestCasesPassingFilters);
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("swept_selected_count", 1, SelectedCount);

bool has_test_case_filter(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--test-case=", 12) == 0 || std::strncmp(argv[i], "-tc=", 4) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int rc = context.run();
  if (context.shouldExit()) return rc;
  if (rc == 0 && g_selected == 0 && has_test_case_filter(argc, argv)) {
    std::fprintf(stderr,
                 "no test case matches the --test-case filter: the name was cut or mistyped (a test name must not "
                 "contain ';', which CMake splits lists at)\n");
    return 1;
  }
  return rc;
}
