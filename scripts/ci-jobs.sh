# Sourced by .ci/run: steps with their times, and jobs that run in the background beside them.
#
#   step NAME              a foreground step: prints its header; its time is kept for the summary
#   background NAME CMD…   runs CMD in its own process group, its output into target/ci/NAME.log
#   join NAME              waits for NAME, prints its log and its time; a failure ends the run
#                          naming NAME (the other jobs are stopped by the EXIT trap)
#   summary                the time of every step and job, then the whole run's (a failed run
#                          prints it on exit)
#
# A job must not share ports, files or process-table checks with what runs beside it (see the
# comment at each `background` in .ci/run). CI_SERIAL=1 runs every job in the foreground where
# it is started (the old sequential run, to compare times or on a machine too small to share). Its output is shown whole when it is joined, so the
# log of a parallel run reads as a sequential one.

ci_logs=target/ci
mkdir -p "$ci_logs"
ci_began=$SECONDS
ci_step=""
ci_step_began=0
ci_times=()
declare -A ci_pid=() ci_job_began=()

_ci_end_step() {
    if [ -n "$ci_step" ]; then
        ci_times+=("$((SECONDS - ci_step_began))|$ci_step")
        ci_step=""
    fi
}

step() {
    _ci_end_step
    ci_step="$*"
    ci_step_began=$SECONDS
    printf '\n=== %s\n' "$*"
}

background() {
    local name=$1
    shift
    if [ "${CI_SERIAL:-}" = 1 ]; then  # every job in the foreground, one after another
        printf '\n=== %s (CI_SERIAL=1: in the foreground; log: %s/%s.log)\n' \
            "$name" "$ci_logs" "$name"
        local status
        ci_job_began[$name]=$SECONDS
        set +e  # not `|| status=$?`, which would turn errexit off inside the job
        _ci_timed "$name" "$@" </dev/null >"$ci_logs/$name.log" 2>&1
        status=$?
        set -e
        echo "$status" >"$ci_logs/$name.status"
        ci_pid[$name]=""
        return 0
    fi
    # set -m: the job gets a process group of its own, so that stopping it reaches everything
    # it started; its standard input is /dev/null (a job must not read the terminal).
    set -m
    _ci_timed "$name" "$@" </dev/null >"$ci_logs/$name.log" 2>&1 &
    ci_pid[$name]=$!
    set +m
    ci_job_began[$name]=$SECONDS
    printf '\n=== started in the background: %s (log: %s/%s.log)\n' "$name" "$ci_logs" "$name"
}

_ci_timed() {  # NAME CMD…: runs CMD; writes how long it took to target/ci/NAME.took
    local name=$1 began=$SECONDS status errexit=""
    shift
    # Not `CMD || status=$?`: errexit is off inside such a list, so a failing command in a
    # shell function given as CMD would not stop it. The caller's errexit is put back as it was.
    [[ $- != *e* ]] || errexit=yes
    set +e
    (
        set -e
        "$@"
    )
    status=$?
    [ -z "$errexit" ] || set -e
    echo "$((SECONDS - began))" >"$ci_logs/$name.took"
    return "$status"
}

join() {
    local name=$1 status=0
    _ci_end_step
    if [ -n "${ci_pid[$name]}" ]; then
        wait "${ci_pid[$name]}" || status=$?
    else  # CI_SERIAL=1: it ran already
        status=$(cat "$ci_logs/$name.status")
    fi
    unset "ci_pid[$name]"
    local waited=$((SECONDS - ci_job_began[$name])) took
    took=$(cat "$ci_logs/$name.took" 2>/dev/null || echo "$waited")
    ci_times+=("$took|$name (background; joined $waited s after its start)")
    printf '\n=== %s (background: %d s, joined %d s after its start)\n' "$name" "$took" "$waited"
    cat "$ci_logs/$name.log"
    if [ "$status" != 0 ]; then
        printf '\n.ci/run: the background job "%s" failed (exit %d); its log is above and in %s/%s.log\n' \
            "$name" "$status" "$ci_logs" "$name" >&2
        exit "$status"
    fi
}

_ci_stop_jobs() {
    local name
    for name in "${!ci_pid[@]}"; do
        [ -n "${ci_pid[$name]}" ] || continue
        echo ".ci/run: stopping the background job $name" >&2
        kill -TERM -- "-${ci_pid[$name]}" 2>/dev/null || true
    done
    for name in "${!ci_pid[@]}"; do
        [ -z "${ci_pid[$name]}" ] || wait "${ci_pid[$name]}" 2>/dev/null || true
    done
}

summary() {
    _ci_end_step
    printf '\n=== times (s)\n'
    local entry
    for entry in "${ci_times[@]}"; do
        printf '%6d  %s\n' "${entry%%|*}" "${entry#*|}"
    done
    printf '%6d  the whole run\n' "$((SECONDS - ci_began))"
    ci_summarised=yes
}

_ci_on_exit() {
    local status=$?
    _ci_stop_jobs
    # A failed run still says how long each step took (the failed one last).
    [ -n "${ci_summarised:-}" ] || summary >&2
    return "$status"
}
trap _ci_on_exit EXIT
