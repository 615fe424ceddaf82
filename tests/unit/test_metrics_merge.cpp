// The metrics of several workers as the process's one (core/metrics_merge.hpp).
#include <doctest/doctest.h>

#include <string>

#include "core/metrics_merge.hpp"

using namespace pgtether;

TEST_CASE("samples with the same name and labels add up; families and samples keep their order") {
    const std::string a =
        "# HELP pgtether_info pgtether's version\n"
        "# TYPE pgtether_info gauge\n"
        "pgtether_info{version=\"0.1\"} 1\n"
        "# HELP pgtether_transactions Transactions pooled\n"
        "# TYPE pgtether_transactions counter\n"
        "pgtether_transactions_total{database=\"db\",user=\"u\"} 10\n"
        "# HELP pgtether_pool_max_wait_seconds How long\n"
        "# TYPE pgtether_pool_max_wait_seconds gauge\n"
        "pgtether_pool_max_wait_seconds{database=\"db\",user=\"u\"} 0.000500\n"
        "# EOF\n";
    const std::string b =
        "# HELP pgtether_info pgtether's version\n"
        "# TYPE pgtether_info gauge\n"
        "pgtether_info{version=\"0.1\"} 1\n"
        "# HELP pgtether_transactions Transactions pooled\n"
        "# TYPE pgtether_transactions counter\n"
        "pgtether_transactions_total{database=\"other\",user=\"u\"} 3\n"
        "pgtether_transactions_total{database=\"db\",user=\"u\"} 5\n"
        "# HELP pgtether_pool_max_wait_seconds How long\n"
        "# TYPE pgtether_pool_max_wait_seconds gauge\n"
        "pgtether_pool_max_wait_seconds{database=\"db\",user=\"u\"} 1.250000\n"
        "# EOF\n";
    CHECK(merge_metrics_texts({a, b}) ==
          "# HELP pgtether_info pgtether's version\n"
          "# TYPE pgtether_info gauge\n"
          "pgtether_info{version=\"0.1\"} 1\n"
          "# HELP pgtether_transactions Transactions pooled\n"
          "# TYPE pgtether_transactions counter\n"
          "pgtether_transactions_total{database=\"db\",user=\"u\"} 15\n"
          "pgtether_transactions_total{database=\"other\",user=\"u\"} 3\n"
          "# HELP pgtether_pool_max_wait_seconds How long\n"
          "# TYPE pgtether_pool_max_wait_seconds gauge\n"
          "pgtether_pool_max_wait_seconds{database=\"db\",user=\"u\"} 1.250000\n"
          "# EOF\n");
}

TEST_CASE("seconds add up exactly; the Prometheus format has no EOF line") {
    const std::string a =
        "# TYPE pgtether_query_duration_seconds summary\n"
        "pgtether_query_duration_seconds_sum 0.000866\n"
        "pgtether_query_duration_seconds_count 2\n";
    const std::string b =
        "# TYPE pgtether_query_duration_seconds summary\n"
        "pgtether_query_duration_seconds_sum 1.999134\n"
        "pgtether_query_duration_seconds_count 3\n";
    CHECK(merge_metrics_texts({a, b}) ==
          "# TYPE pgtether_query_duration_seconds summary\n"
          "pgtether_query_duration_seconds_sum 2.000000\n"
          "pgtether_query_duration_seconds_count 5\n");
    CHECK(metrics_family_takes_max("pgtether_paused"));
    CHECK_FALSE(metrics_family_takes_max("pgtether_client_connections"));
    // Limits and process-wide counts are the same in every worker: not multiplied by N.
    for (const char* name : {"pgtether_max_client_conn", "pgtether_pool_size",
                             "pgtether_pool_reserve_size", "pgtether_pool_tether_reserve_size",
                             "pgtether_process_open_fds", "pgtether_process_max_fds",
                             // per host: one worker's view, not a count of workers
                             "pgtether_host_up", "pgtether_host_role",
                             "pgtether_host_backoff_seconds", "pgtether_host_failures"}) {
        CAPTURE(name);
        CHECK(metrics_family_takes_max(name));
    }
}
