/* Unit tests of crlaunch's sharing out of CPUs among a host's ranks
 * (src/launcher/bind.c): which CPUs each rank gets on machines of several
 * shapes, without binding anything. crlaunch's binding itself runs end to
 * end in test_launcher (test_bind). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bind.h"
#include "check_main.h"

/* "0,4" for the CPUs local rank `local` of `nlocal` gets. */
static const char *assigned(const crnet__cpu *cpus, int n, int nlocal,
                            int local) {
  static char buf[256];
  int out[64], k = crnet__bind_assign(cpus, n, nlocal, local, out);
  buf[0] = '\0';
  for (int i = 0; i < k; i++)
    snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%d",
             i ? "," : "", out[i]);
  return buf;
}

/* n CPUs of one package, a core each. */
static void flat(crnet__cpu *c, int n) {
  for (int i = 0; i < n; i++)
    c[i] = (crnet__cpu){i, 0, i};
}

START_TEST(test_two_cpus) {
  crnet__cpu c[2];
  flat(c, 2);
  ck_assert_str_eq(assigned(c, 2, 1, 0), "0,1");
  ck_assert_str_eq(assigned(c, 2, 2, 0), "0");
  ck_assert_str_eq(assigned(c, 2, 2, 1), "1");
  /* more ranks than CPUs: in turn */
  for (int i = 0; i < 5; i++)
    ck_assert_str_eq(assigned(c, 2, 5, i), i % 2 ? "1" : "0");
}
END_TEST

/* Four cores of two threads, numbered as x86 Linux does: core c is CPUs c
 * and c + 4. */
static void smt(crnet__cpu *c) {
  for (int i = 0; i < 8; i++)
    c[i] = (crnet__cpu){i, 0, i % 4};
}

START_TEST(test_smt) {
  crnet__cpu c[8];
  smt(c);
  /* a core each: both of its threads */
  for (int i = 0; i < 4; i++) {
    char want[16];
    snprintf(want, sizeof want, "%d,%d", i, i + 4);
    ck_assert_str_eq(assigned(c, 8, 4, i), want);
  }
  /* two cores each */
  ck_assert_str_eq(assigned(c, 8, 2, 0), "0,1,4,5");
  ck_assert_str_eq(assigned(c, 8, 2, 1), "2,3,6,7");
  /* one CPU each: every core's first thread before any second one */
  for (int i = 0; i < 8; i++) {
    char want[16];
    snprintf(want, sizeof want, "%d", i);
    ck_assert_str_eq(assigned(c, 8, 8, i), want);
  }
  ck_assert_str_eq(assigned(c, 8, 6, 3), "3");
  ck_assert_str_eq(assigned(c, 8, 6, 4), "4");
  /* three ranks: blocks of 3, 3 and 2 CPUs in core order */
  ck_assert_str_eq(assigned(c, 8, 3, 0), "0,1,4");
  ck_assert_str_eq(assigned(c, 8, 3, 1), "2,5,6");
  ck_assert_str_eq(assigned(c, 8, 3, 2), "3,7");
  /* ten ranks: in turn, one per core first */
  ck_assert_str_eq(assigned(c, 8, 10, 8), "0");
  ck_assert_str_eq(assigned(c, 8, 10, 9), "1");
}
END_TEST

/* Two packages whose cores are numbered 0..3 in each. */
START_TEST(test_two_packages) {
  crnet__cpu c[8];
  for (int i = 0; i < 8; i++)
    c[i] = (crnet__cpu){i, i / 4, i % 4};
  ck_assert_str_eq(assigned(c, 8, 2, 0), "0,1,2,3");
  ck_assert_str_eq(assigned(c, 8, 2, 1), "4,5,6,7");
  for (int i = 0; i < 8; i++) {
    char want[16];
    snprintf(want, sizeof want, "%d", i);
    ck_assert_str_eq(assigned(c, 8, 8, i), want);
  }
}
END_TEST

/* A mask with holes (taskset -c 1,3,5,6), given in no order. */
START_TEST(test_holes) {
  crnet__cpu c[4] = {{6, 0, 6}, {1, 0, 1}, {5, 0, 5}, {3, 0, 3}};
  ck_assert_str_eq(assigned(c, 4, 2, 0), "1,3");
  ck_assert_str_eq(assigned(c, 4, 2, 1), "5,6");
  ck_assert_str_eq(assigned(c, 4, 4, 0), "1");
  ck_assert_str_eq(assigned(c, 4, 4, 3), "6");
}
END_TEST

/* Every shape of 1 to 12 CPUs and 1 to 30 ranks: the ranks' CPUs are the
 * machine's; with enough CPUs they are disjoint and blocks differ by at
 * most one; with too few every rank has one and no CPU has two ranks more
 * than another. */
START_TEST(test_every_shape) {
  crnet__cpu c[12];
  for (int n = 1; n <= 12; n++) {
    smt(c);
    flat(c, n);
    for (int nlocal = 1; nlocal <= 30; nlocal++) {
      int per_cpu[12] = {0}, lo = 64, hi = 0, out[12];
      for (int local = 0; local < nlocal; local++) {
        int k = crnet__bind_assign(c, n, nlocal, local, out);
        ck_assert_msg(k >= 1, "n %d nlocal %d local %d: no CPU", n, nlocal,
                      local);
        if (nlocal > n)
          ck_assert_int_eq(k, 1);
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
        for (int i = 0; i < k; i++) {
          ck_assert(out[i] >= 0 && out[i] < n);
          per_cpu[out[i]]++;
        }
      }
      ck_assert_int_le(hi - lo, 1);
      int cl = 64, ch = 0;
      for (int i = 0; i < n; i++) {
        cl = per_cpu[i] < cl ? per_cpu[i] : cl;
        ch = per_cpu[i] > ch ? per_cpu[i] : ch;
      }
      if (nlocal <= n)
        ck_assert_msg(ch <= 1, "n %d nlocal %d: a CPU of two ranks", n,
                      nlocal);
      else
        ck_assert_msg(ch - cl <= 1, "n %d nlocal %d: %d to %d per CPU", n,
                      nlocal, cl, ch);
    }
  }
}
END_TEST

START_TEST(test_out_of_range) {
  crnet__cpu c[2];
  int out[2];
  flat(c, 2);
  ck_assert_int_eq(crnet__bind_assign(c, 2, 2, 2, out), 0);
  ck_assert_int_eq(crnet__bind_assign(c, 2, 2, -1, out), 0);
  ck_assert_int_eq(crnet__bind_assign(c, 0, 2, 0, out), 0);
  ck_assert_int_eq(crnet__bind_assign(c, 2, 0, 0, out), 0);
}
END_TEST

START_TEST(test_list_format) {
  char buf[64];
  int a[] = {0, 1, 2, 4, 6, 7}, b[] = {5};
  crnet__cpu_list_format(a, 6, buf, sizeof buf);
  ck_assert_str_eq(buf, "0-2,4,6-7");
  crnet__cpu_list_format(b, 1, buf, sizeof buf);
  ck_assert_str_eq(buf, "5");
  crnet__cpu_list_format(a, 0, buf, sizeof buf);
  ck_assert_str_eq(buf, "");
  crnet__cpu_list_format(a, 6, buf, 4); /* cut short, still a string */
  ck_assert_int_lt((int)strlen(buf), 4);
}
END_TEST

/* With --bind none nothing is bound, whatever the plan. */
START_TEST(test_none_binds_nothing) {
  crnet__bind_plan p;
  cpu_set_t before, after, saved;
  char why[128], desc[64];
  ck_assert_int_eq(sched_getaffinity(0, sizeof before, &before), 0);
  ck_assert_int_eq(crnet__bind_plan_init(&p, CRNET__BIND_NONE, 2, why,
                                         sizeof why),
                   0);
  ck_assert_int_eq(p.ncpus, CPU_COUNT(&before));
  ck_assert_int_eq(crnet__bind_enter(&p, 0, &saved, desc, sizeof desc), 1);
  ck_assert_int_eq(sched_getaffinity(0, sizeof after, &after), 0);
  ck_assert(CPU_EQUAL(&before, &after));
  crnet__bind_plan_free(&p);
}
END_TEST

/* auto sets the thread's mask to the rank's CPUs, and leave restores it. */
START_TEST(test_enter_leave) {
  crnet__bind_plan p;
  cpu_set_t before, during, after, saved;
  char why[128], desc[64];
  ck_assert_int_eq(sched_getaffinity(0, sizeof before, &before), 0);
  ck_assert_int_eq(crnet__bind_plan_init(&p, CRNET__BIND_AUTO,
                                         CPU_COUNT(&before), why, sizeof why),
                   0);
  ck_assert_int_eq(crnet__bind_enter(&p, 0, &saved, desc, sizeof desc), 0);
  ck_assert_int_eq(sched_getaffinity(0, sizeof during, &during), 0);
  ck_assert_int_eq(CPU_COUNT(&during), 1);
  ck_assert_msg(desc[0] >= '0' && desc[0] <= '9', "desc '%s'", desc);
  crnet__bind_leave(&saved);
  ck_assert_int_eq(sched_getaffinity(0, sizeof after, &after), 0);
  ck_assert(CPU_EQUAL(&before, &after));
  crnet__bind_plan_free(&p);
}
END_TEST

int main(void) {
  Suite *s = suite_create("bind");
  TCase *tc = tcase_create("bind");
  tcase_add_test(tc, test_two_cpus);
  tcase_add_test(tc, test_smt);
  tcase_add_test(tc, test_two_packages);
  tcase_add_test(tc, test_holes);
  tcase_add_test(tc, test_every_shape);
  tcase_add_test(tc, test_out_of_range);
  tcase_add_test(tc, test_list_format);
  tcase_add_test(tc, test_none_binds_nothing);
  tcase_add_test(tc, test_enter_leave);
  suite_add_tcase(s, tc);
  return check_run(s);
}
