//! Whether our child has exited, and how, without reaping it: its pid (the group id of its
//! group) stays ours until the caller has signalled the whole group.

use std::io;

/// The exit status of our child `pid` if it has exited, without reaping it.
pub(crate) fn peek_exit(pid: libc::pid_t) -> Option<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    let info = waitid_nowait(pid).ok()??;
    // SAFETY: the siginfo was filled by waitid for a child that exited.
    let status = unsafe { info.si_status() };
    // Rebuild the wait(2) status word std understands from the siginfo.
    Some(match info.si_code {
        libc::CLD_EXITED => std::process::ExitStatus::from_raw((status & 0xff) << 8),
        libc::CLD_DUMPED => std::process::ExitStatus::from_raw((status & 0x7f) | 0x80),
        _ => std::process::ExitStatus::from_raw(status & 0x7f),
    })
}

/// Whether `pid` (our child) has exited, without reaping it. A pid that is no longer our
/// child (already reaped, by `close()` on another thread) has exited too.
pub(crate) fn has_exited(pid: libc::pid_t) -> bool {
    !matches!(waitid_nowait(pid), Ok(None))
}

/// `waitid(WEXITED | WNOHANG | WNOWAIT)`: the exit record of our child `pid`, left in place.
fn waitid_nowait(pid: libc::pid_t) -> io::Result<Option<libc::siginfo_t>> {
    // SAFETY: waitid with WNOWAIT only inspects; the siginfo is ours to fill.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        if libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((info.si_pid() != 0).then_some(info))
    }
}
