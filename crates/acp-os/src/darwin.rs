//! The macOS side of the process code: macOS has no /proc, so the process table
//! (`proc_table`) comes from libproc (`proc_listpids`, `proc_pidinfo(PROC_PIDTBSDINFO)`) and
//! the session from getsid(2); and the guard waits on its stdin with pselect(2), as Linux with
//! ppoll. The Linux code reads /proc and is not compiled here.

/// What the guard and the stop path need to know of one process.
pub(crate) struct Info {
    pub zombie: bool,
    pub stopped: bool,
    pub ppid: libc::pid_t,
    pub pgid: libc::pid_t,
    pub sid: libc::pid_t,
    /// Start time in microseconds since the epoch: with the pid, it names one process.
    pub start: u64,
}

/// One `proc_pidinfo` record of `flavor` for `pid`, or None (gone, or not ours to read).
///
/// # Safety
/// `T` must be the plain-data struct the kernel fills for `flavor`.
unsafe fn pidinfo<T>(pid: libc::pid_t, flavor: libc::c_int) -> Option<T> {
    let mut record: T = std::mem::zeroed();
    let size = std::mem::size_of::<T>() as libc::c_int;
    let filled = libc::proc_pidinfo(pid, flavor, 0, (&mut record as *mut T).cast(), size);
    (filled == size).then_some(record)
}

pub(crate) fn info(pid: libc::pid_t) -> Option<Info> {
    // SAFETY: getsid(2) of any pid only reads.
    let sid = unsafe { libc::getsid(pid) };
    // SAFETY: proc_bsdinfo is what PROC_PIDTBSDINFO fills.
    if let Some(bsd) = unsafe { pidinfo::<libc::proc_bsdinfo>(pid, libc::PROC_PIDTBSDINFO) } {
        return Some(Info {
            zombie: bsd.pbi_status == libc::SZOMB,
            stopped: bsd.pbi_status == libc::SSTOP,
            ppid: bsd.pbi_ppid as libc::pid_t,
            pgid: bsd.pbi_pgid as libc::pid_t,
            sid,
            start: bsd.pbi_start_tvsec * 1_000_000 + bsd.pbi_start_tvusec,
        });
    }
    // Another user's process (a setuid program the agent ran): the full record is refused, the
    // short one is not, and its parent link still leads the walk to what it started. Its start
    // time is unknown (0: not the process a leader was registered as).
    // SAFETY: proc_bsdshortinfo is what PROC_PIDT_SHORTBSDINFO fills.
    let short = unsafe { pidinfo::<libc::proc_bsdshortinfo>(pid, libc::PROC_PIDT_SHORTBSDINFO) }?;
    Some(Info {
        zombie: short.pbsi_status == libc::SZOMB,
        stopped: short.pbsi_status == libc::SSTOP,
        ppid: short.pbsi_ppid as libc::pid_t,
        pgid: short.pbsi_pgid as libc::pid_t,
        sid,
        start: 0,
    })
}

// sys/proc_info.h (not in the libc crate).
const PROC_ALL_PIDS: u32 = 1;

/// proc_listpids(2 calls): with no buffer it returns the bytes needed, then the bytes filled.
/// Room to spare, since processes may start between the two calls.
fn list(kind: u32, arg: u32) -> Vec<libc::pid_t> {
    let width = std::mem::size_of::<libc::pid_t>();
    // SAFETY: a null buffer of size 0 only asks for the size.
    let needed = unsafe { libc::proc_listpids(kind, arg, std::ptr::null_mut(), 0) };
    if needed < 0 {
        return Vec::new();
    }
    let mut pids: Vec<libc::pid_t> = vec![0; needed as usize / width + 64];
    let bytes = (pids.len() * width) as libc::c_int;
    // SAFETY: the buffer holds `bytes` bytes.
    let filled = unsafe { libc::proc_listpids(kind, arg, pids.as_mut_ptr().cast(), bytes) };
    pids.truncate(filled.max(0) as usize / width);
    pids.retain(|&pid| pid > 0);
    pids
}

pub(crate) fn all_pids() -> Vec<libc::pid_t> {
    list(PROC_ALL_PIDS, 0)
}

/// Waits until stdin is readable or a signal not in `mask` arrives (pselect(2) swaps the mask in
/// atomically, like Linux's ppoll). Returns what pselect returned.
pub(crate) fn wait_stdin(mask: &libc::sigset_t) -> libc::c_int {
    // SAFETY: an fd_set we own holding fd 0; no timeout; the mask is valid.
    unsafe {
        let mut readable: libc::fd_set = std::mem::zeroed();
        libc::FD_ZERO(&mut readable);
        libc::FD_SET(0, &mut readable);
        libc::pselect(
            1,
            &mut readable,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            mask,
        )
    }
}
