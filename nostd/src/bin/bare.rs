//! [`flowgate_nostd::run`] in a program with no `std` anywhere: `#![no_std]`, its own entry
//! point (C's `main`, called by the C runtime's start files), allocator (the C library's) and,
//! under `--cfg flowgate_bare`, panic handler. A crate in the graph that linked `std` would
//! bring a second panic handler, which the link refuses (E0152): `scripts/nostd` builds this
//! with that cfg, runs it, and expects exit status 0 (every check passed).
//!
//! Built without the cfg (as `cargo clippy --workspace --all-features` and `cargo test
//! --workspace --all-targets` do, where other members turn flowgate's `std` on), it takes
//! `std`'s panic handler and proves nothing; it runs the checks with `std` and says so.

#![no_std]
#![no_main]

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::{c_char, c_int, c_void};

#[link(name = "c")]
extern "C" {
    fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int;
    fn free(ptr: *mut c_void);
    fn write(fd: c_int, buf: *const c_void, count: usize) -> isize;
    #[cfg(flowgate_bare)]
    fn abort() -> !;
}

/// The C library's allocator, aligned as asked.
struct Malloc;

// SAFETY: `posix_memalign` returns memory of at least `size` bytes aligned to `align` (a power
// of two, raised to the pointer size it requires) or fails, which is reported as null; `free`
// takes back exactly what it returned.
unsafe impl GlobalAlloc for Malloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let mut out = core::ptr::null_mut();
        let align = layout.align().max(core::mem::size_of::<usize>());
        // SAFETY: `out` is a valid place for the pointer; `align` is a power of two and a
        // multiple of the pointer size.
        if unsafe { posix_memalign(&mut out, align, layout.size()) } != 0 {
            return core::ptr::null_mut();
        }
        out.cast()
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from `alloc` above (GlobalAlloc's contract).
        unsafe { free(ptr.cast()) };
    }
}

#[global_allocator]
static ALLOCATOR: Malloc = Malloc;

fn say(text: &str) {
    // SAFETY: the buffer is `text`'s bytes, valid for their length; fd 2 is stderr.
    let _ = unsafe { write(2, text.as_ptr().cast(), text.len()) };
}

#[cfg(flowgate_bare)]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    say("flowgate-nostd: panicked\n");
    // SAFETY: ends the process; nothing after it runs.
    unsafe { abort() }
}

/// The unwinding personality routine that the precompiled `alloc` refers to. The program
/// aborts on panic (`-C panic=abort`), so nothing ever unwinds and this is never called; `std`,
/// absent here, would have provided it.
#[cfg(flowgate_bare)]
#[no_mangle]
extern "C" fn rust_eh_personality() {}

/// The program: every check of [`flowgate_nostd::run`], exit status 0 if all passed.
#[no_mangle]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    if !flowgate_nostd::without_std() {
        say("flowgate-nostd: flowgate was built with std (another crate turned it on)\n");
        // Only the bare build proves anything; elsewhere (`cargo test --all-targets` runs this
        // too) the checks still run, with std.
        if cfg!(flowgate_bare) {
            return 2;
        }
    }
    match flowgate_nostd::run() {
        Ok(_) => {
            say("flowgate-nostd: every check passed without std\n");
            0
        }
        Err(failure) => {
            say("flowgate-nostd: ");
            say(failure);
            say("\n");
            1
        }
    }
}
