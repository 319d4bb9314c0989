/*
 * ct_phase.c - the one place where a transfer changes phase or pause
 * reasons (the phases are described in include/ct_loop.h). Like curl's
 * mstate(), every change goes through here so it can be checked against
 * the table of legal moves and traced.
 */
#include "ct_internal.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#define BIT(p) (1u << (p))

/* legal[from]: the phases `from` may move to. */
static const unsigned legal[CT_PHASE_DONE + 1] = {
  /* QUEUED */     BIT(CT_PHASE_CONNECTING) | BIT(CT_PHASE_FINISHING),
  /* CONNECTING */ BIT(CT_PHASE_HEAD) | BIT(CT_PHASE_DECIDING) |
                   BIT(CT_PHASE_RECEIVING) | BIT(CT_PHASE_FINISHING),
  /* HEAD */       BIT(CT_PHASE_CONNECTING) | BIT(CT_PHASE_CHALLENGED) |
                   BIT(CT_PHASE_DECIDING) | BIT(CT_PHASE_RECEIVING) |
                   BIT(CT_PHASE_FINISHING),
  /* CHALLENGED */ BIT(CT_PHASE_HEAD) | BIT(CT_PHASE_DECIDING) |
                   BIT(CT_PHASE_RECEIVING) | BIT(CT_PHASE_FINISHING),
  /* DECIDING */   BIT(CT_PHASE_RECEIVING) | BIT(CT_PHASE_FINISHING),
  /* RECEIVING */  BIT(CT_PHASE_FINISHING),
  /* FINISHING */  BIT(CT_PHASE_COMMITTING) | BIT(CT_PHASE_DONE),
  /* COMMITTING */ BIT(CT_PHASE_DONE),
  /* DONE */       0
};

const char *ct_phase_name(ct_phase phase)
{
  static const char *const names[] = {
    "queued", "connecting", "head", "challenged", "deciding", "receiving",
    "finishing", "committing", "done"
  };
  if((unsigned)phase > CT_PHASE_DONE)
    return "?";
  return names[phase];
}

uint64_t ct_loop_illegal_transitions(const struct ct_loop *loop)
{
  return __atomic_load_n(&loop->illegal_transitions, __ATOMIC_RELAXED);
}

static void pause_text(uint32_t paused, char *out, size_t cap)
{
  snprintf(out, cap, "%s%s%s%s%s%s%s", paused ? "" : "-",
           (paused & CT_PAUSE_USER) ? "U" : "",
           (paused & CT_PAUSE_DISPOSITION) ? "D" : "",
           (paused & CT_PAUSE_RATE) ? "R" : "",
           (paused & CT_PAUSE_SOURCE) ? "S" : "",
           (paused & CT_PAUSE_FILE) ? "F" : "",
           (paused & CT_PAUSE_CONSUMER) ? "C" : "");
}

static void trace(struct cti_transfer *t, ct_phase from, uint32_t before,
                  const char *why)
{
  struct ct_loop *loop = t->loop;
  if(loop->trace_phases) {
    char a[12];
    char b[12];
    pause_text(before, a, sizeof(a));
    pause_text(t->paused, b, sizeof(b));
    fprintf(stderr, "ct: transfer %llu: %s -> %s, paused %s -> %s (%s)\n",
            (unsigned long long)t->id, ct_phase_name(from),
            ct_phase_name(t->phase), a, b, why);
  }
#ifdef CT_TEST_HOOKS
  if(loop->config.on_phase) {
    struct ct_phase_event ev;
    ev.id = t->id;
    ev.from = from;
    ev.to = t->phase;
    ev.paused_before = before;
    ev.paused_after = t->paused;
    ev.why = why;
    loop->config.on_phase(loop->config.batch_ctx, &ev);
  }
#endif
}

/* An engine bug: caught in debug builds, counted and ignored in release
 * builds (the transfer keeps its phase, which is always a safe one). */
static void illegal(struct cti_transfer *t, ct_phase to, const char *why)
{
  __atomic_add_fetch(&t->loop->illegal_transitions, 1, __ATOMIC_RELAXED);
  if(t->loop->trace_phases)
    fprintf(stderr, "ct: transfer %llu: illegal %s -> %s (%s) ignored\n",
            (unsigned long long)t->id, ct_phase_name(t->phase),
            ct_phase_name(to), why);
  assert(!"illegal transfer phase change");
}

void cti_transfer_set_phase(struct cti_transfer *t, ct_phase to,
                            const char *why)
{
  ct_phase from = t->phase;

  if(from == to)
    return;
  if((unsigned)to > CT_PHASE_DONE || !(legal[from] & BIT(to))) {
    illegal(t, to, why);
    return;
  }
  t->phase = to;
  trace(t, from, t->paused, why);
}

void cti_transfer_pause(struct cti_transfer *t, uint32_t reason, int on,
                        const char *why)
{
  uint32_t before = t->paused;
  uint32_t after = on ? (before | reason) : (before & ~reason);

  if(after == before)
    return;
  if(on && reason != CT_PAUSE_USER && !cti_transfer_in_multi(t)) {
    /* Only libcurl's transfers pause for the engine's own reasons; the
     * user's is recorded before admission and applied then. */
    illegal(t, t->phase, why);
    return;
  }
  /* State and trace first: unpausing may make libcurl deliver held bytes
   * at once, and the callbacks that run then must see the new reasons. */
  t->paused = after;
  trace(t, t->phase, before, why);
  if(!cti_transfer_in_multi(t))
    return;
  if(on && reason == CT_PAUSE_USER)
    curl_easy_pause(t->easy, CURLPAUSE_ALL);
  else if(!on && after == 0) {
    curl_easy_pause(t->easy, CURLPAUSE_CONT);
    /* a connection left alone with records for a paused stream is
     * driven again (ct_tls_read.c) */
    t->loop->tls_unpauses++;
  }
  /* The other reasons are set from libcurl's own callbacks, which pause
   * their direction by returning CURL_WRITEFUNC_PAUSE or
   * CURL_READFUNC_PAUSE. */
}
