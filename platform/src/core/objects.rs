//! The wrapper types for every OpenCL object kind except platforms and devices
//! (see `platform.rs`). Each holds its vendor handle and counted references to the
//! wrappers it depends on, so handle-valued queries are answered from here and always
//! give the application its own wrappers.

use crate::core::cl::*;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

use super::forward::Inner;
use super::handle::{Obj, Ref};
use super::platform::{Device, Platform};
use crate::declare_kind;

pub struct Context {
    pub inner: Inner<cl_context>,
    pub platform: &'static Obj<Platform>,
    pub devices: Vec<Ref<Device>>,
    /// The application's own property list (with its own platform handle), returned by
    /// `CL_CONTEXT_PROPERTIES`.
    pub app_properties: Vec<cl_context_properties>,
    /// The memory clients of its devices, from its first allocation on.
    pub memory: super::memory::ContextMemory,
}

pub struct Queue {
    pub inner: Inner<cl_command_queue>,
    pub context: Ref<Context>,
    pub device: Ref<Device>,
    /// The application's property list for `CL_QUEUE_PROPERTIES_ARRAY`, when it gave one.
    pub app_properties: Option<Vec<cl_queue_properties>>,
    /// `CL_QUEUE_PRIORITY_KHR` as the application gave it (recorded even when the vendor
    /// lacks cl_khr_priority_hints and the property was stripped before forwarding).
    pub priority: Option<cl_queue_priority_khr>,
    /// The software FIFO, submitter and arbiter client (`None` for device queues).
    pub managed: Option<std::sync::Arc<crate::core::managed::Managed>>,
}

pub struct Mem {
    pub inner: Inner<cl_mem>,
    pub context: Ref<Context>,
    /// The parent of a sub-buffer, or the buffer / image an image was created from.
    pub parent: Option<Ref<Mem>>,
    /// The device memory it holds, returned when the wrapper goes.
    pub charges: super::memory::Charges,
}

pub struct Sampler {
    pub inner: Inner<cl_sampler>,
    pub context: Ref<Context>,
}

pub struct Program {
    pub inner: Inner<cl_program>,
    pub context: Ref<Context>,
    /// The program's devices; `CL_PROGRAM_DEVICES` is answered from the vendor's list
    /// mapped back through the device registry, so this is only what creation named.
    pub devices: Vec<Ref<Device>>,
    /// Where its code came from, which decides whether its kernels may be sliced.
    pub origin: Mutex<crate::core::sliceable::Origin>,
    /// Set while its executable is rewritten code (see `core::rewritten`).
    pub exec: Mutex<Option<std::sync::Arc<crate::core::rewritten::Exec>>>,
    /// What the program store knew of the binary it was created from.
    pub known: Mutex<Option<std::sync::Arc<crate::store::Entry>>>,
    /// The source its executable was compiled from (`clCompileProgram`), for the
    /// store's recipe of a program linked from it.
    pub unit: Mutex<Option<std::sync::Arc<crate::store::Unit>>>,
    /// A rewritten build is running on a thread of the layer (the application passed a
    /// build notification): the program has no executable yet.
    pub building: std::sync::atomic::AtomicBool,
    /// What the layer knows of each kernel of its executable, by name (see
    /// [`KernelClass`]); emptied when the program is built again.
    pub classes: Mutex<std::collections::HashMap<String, std::sync::Arc<KernelClass>>>,
    /// Its kernels' persistent entries, for yielding launches (`core::yield_program`).
    pub yielding: Mutex<crate::core::yield_program::YieldState>,
    /// The options of its latest `clBuildProgram`, for the persistent entries' build.
    pub options: Mutex<Option<std::ffi::CString>>,
}

impl Program {
    /// The class of kernel `name` of this program's executable, made by `make` on first
    /// use: every kernel object of that name shares it.
    pub fn class(
        &self,
        name: &str,
        make: impl FnOnce() -> KernelClass,
    ) -> std::sync::Arc<KernelClass> {
        let mut classes = self.classes.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = classes.get(name) {
            return c.clone();
        }
        let c = std::sync::Arc::new(make());
        classes.insert(name.to_string(), c.clone());
        c
    }

    /// Forgets the kernel classes (a new build, or the application's last release): what
    /// was learned about their launches goes with them.
    pub fn forget_classes(&self) {
        let old = std::mem::take(&mut *self.classes.lock().unwrap_or_else(|e| e.into_inner()));
        for c in old.values() {
            crate::core::managed::forget_kernel(c);
            // Its spare vendor kernels hold the vendor program (a rebuild would fail, a
            // release would not free it); kernel objects of the old build that are
            // released later go to the vendor.
            c.spares.empty(true);
        }
    }

    /// Releases the spare vendor kernels of every class, which keep the vendor program's
    /// kernels attached (see [`KernelClass::spares`]); the classes keep collecting.
    pub fn release_spares(&self) {
        let classes: Vec<_> = self
            .classes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        for c in classes {
            c.spares.empty(false);
        }
    }

    /// The class of kernel `name` and one of its spare vendor kernels, if it has one.
    pub fn spare(
        &self,
        name: &str,
    ) -> Option<(std::sync::Arc<KernelClass>, crate::core::kernel_pool::Spare)> {
        let class = self
            .classes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)?
            .clone();
        let spare = class.spares.take()?;
        Some((class, spare))
    }

    /// The options of its latest build (see [`Program::options`]).
    pub fn build_options(&self) -> Option<std::ffi::CString> {
        self.options
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The store's entry for the binary it was created from.
    pub fn known(&self) -> Option<std::sync::Arc<crate::store::Entry>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn building(&self) -> bool {
        self.building.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The rewritten executable, if the program has one.
    pub fn exec(&self) -> Option<std::sync::Arc<crate::core::rewritten::Exec>> {
        self.exec.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The vendor program that holds the executable: the one built from rewritten source
    /// when there is one, else the application's own.
    pub fn exec_handle(&self) -> cl_program {
        // Read under the lock, not cloned out: no reference count moves (a hot path of
        // applications that make a kernel object per launch).
        self.exec
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|e| e.program.as_ref().map(|p| p.0.h))
            .unwrap_or(self.inner.h)
    }
}

pub struct Kernel {
    pub inner: Inner<cl_kernel>,
    pub program: Ref<Program>,
    /// What the arguments hold: the wrapped objects and the recorded values, under one
    /// lock (one lock per `clSetKernelArg`).
    pub args: Mutex<KernelArgs>,
    /// Which arguments have been set: a launch is deferred only when all are, since the
    /// vendor's `CL_INVALID_KERNEL_ARGS` must then come back from the enqueue itself.
    pub args_set: ArgBits,
    /// Memory-object arguments last set to NULL: re-applied to a launch's snapshot, since
    /// PoCL's `clCloneKernel` does not copy them.
    pub null_mems: ArgBits,
    /// Keeps the rewritten executable alive, and tells a rebuild that kernels use it.
    pub exec: Option<std::sync::Arc<crate::core::rewritten::Exec>>,
    /// What every kernel object of this name and program shares: what the vendor's
    /// metadata and the program's analysis say, and learned timing. Read from here, not
    /// copied into each object: a kernel object made for one launch (as OpenCV makes
    /// them) then costs no allocation and no reference counts beyond this one.
    pub class: std::sync::Arc<KernelClass>,
    /// Set once `clSetKernelExecInfo` was called: the vendor kernel keeps that setting
    /// (SVM pointers, fine-grain flags), which no new kernel object may inherit, so it is
    /// released at the end instead of kept as a spare.
    pub exec_info_set: AtomicBool,
    /// Its vendor kernel was a spare of an earlier kernel object (see `core::kernel_pool`).
    pub recycled: bool,
    /// Whether `clSetKernelArg` records its argument values ([`KernelArgs::values`]),
    /// decided when the object is made ([`KernelClass::records_for_new`]) and kept for its
    /// life, so that what it records is never missing a value set in between.
    pub records: bool,
}

/// The wrapper goes when nothing holds it any more: the application released its last
/// reference, and no launch, callback or other holder of the layer's keeps it (they hold
/// the wrapper, `Ref<Kernel>`, for as long as they use its vendor kernel). Only then is
/// the vendor kernel free for another kernel object: it becomes a spare of its class, or
/// its last reference goes to the vendor. (Launches that wait in the layer use a clone,
/// the vendor copies arguments at enqueue, and yielding launches make their own kernel.)
impl Drop for Kernel {
    fn drop(&mut self) {
        let spare = crate::core::kernel_pool::Spare {
            inner: self.inner.clone(),
            exec: self.exec.take(),
        };
        if !self.exec_info_set.load(Relaxed) {
            if let Err(spare) = self.class.spares.put(spare) {
                drop(spare);
            }
        }
    }
}

impl Kernel {
    /// The kernel function's name (for traces and profiles).
    pub fn name(&self) -> &std::sync::Arc<str> {
        &self.class.name
    }

    /// What each argument holds, from the vendor's argument metadata (one entry per
    /// argument); decides which `clSetKernelArg` values are handles to unwrap.
    pub fn arg_kinds(&self) -> &[ArgKind] {
        &self.class.arg_kinds
    }

    /// Whether launches of this kernel may be cut into slices (rule 5).
    pub fn sliceable(&self) -> &Sliceable {
        &self.class.sliceable
    }

    /// The index of the hidden geometry argument of a kernel from rewritten code (one past
    /// the application's last argument; see `core::rewritten`). The vendor kernel holds
    /// `NATIVE_GEOMETRY` there, so direct launches need nothing; a sliced launch's
    /// snapshot gets the whole launch's geometry.
    pub fn hidden(&self) -> Option<cl_uint> {
        self.class.hidden
    }

    /// Whether `clSetKernelArg` records this object's argument values now: it was made to
    /// record ([`Kernel::records`]) and its class may still yield.
    pub fn records_args(&self) -> bool {
        self.records && self.class.records_args()
    }
}

/// A kernel object's arguments (see [`Kernel::args`]).
#[derive(Clone)]
pub struct KernelArgs {
    /// Arguments that hold our wrappers (index → object), so `clSetKernelArg` keeps the
    /// wrapped objects alive exactly as long as the vendor keeps the inner ones.
    /// Sized to the argument count at creation, so setting an argument never allocates;
    /// inline up to [`INLINE_ARGS`] arguments, so a kernel object made for one launch (as
    /// OpenCV makes them) costs no heap allocation.
    pub held: HeldArgs,
    /// The argument values as the vendor got them, so that a yielding launch can give the
    /// same arguments to the kernel's persistent entry (another vendor kernel). Recorded
    /// only while the class may yield ([`KernelClass::records_args`]). `None` once an
    /// argument or setting that cannot be replayed was set (SVM pointers, exec info): such
    /// a kernel does not yield. Boxed, since most kernel objects record nothing: the
    /// object stays small to make and to copy.
    pub values: Option<Box<ArgValues>>,
}

/// One argument's value as the vendor got it (inner handles): its size, and its bytes
/// (`None`: a NULL value, as for `__local` sizes).
#[derive(Clone)]
pub struct ArgValue {
    pub size: usize,
    pub bytes: Option<smallvec::SmallVec<[u8; 16]>>,
}

/// A kernel's argument values, by index (unset: `None`).
pub type ArgValues = smallvec::SmallVec<[Option<ArgValue>; 8]>;

/// What the layer knows of one kernel function of a program's executable, shared by every
/// kernel object made from it. Applications such as OpenCV create a kernel object for
/// each call and release it after: what is read from the vendor at creation (argument
/// kinds) and learned from launches (timing) must outlive the object, or every launch pays
/// for the queries and for being measured again (issue 24).
pub struct KernelClass {
    /// Unique in the process, never reused: the key of its timing models.
    pub id: usize,
    /// See [`Kernel::name`].
    pub name: std::sync::Arc<str>,
    /// See [`Kernel::arg_kinds`].
    pub arg_kinds: Box<[ArgKind]>,
    /// See [`Kernel::sliceable`].
    pub sliceable: Sliceable,
    /// See [`Kernel::hidden`].
    pub hidden: Option<cl_uint>,
    /// Predicted device ns per work-item of the latest launch that went straight to the
    /// vendor as shorter than a piece (f64 bits; 0: none yet): later launches no larger
    /// than half a piece by it skip the launch checks (rule 6's cost).
    pub short_ns_per_item: AtomicU64,
    /// Its launches that a lone queue on a GPU cut into pieces to learn what they cost
    /// (see `Managed::cuts_alone`): counted up to `managed::LEARN_ALONE`.
    pub learned_alone: std::sync::atomic::AtomicU32,
    /// Whether its launches may yet become yielding launches, which replay the argument
    /// values ([`KernelArgs::values`]). Cleared, for good, once the program's persistent
    /// entries are known not to include it (`core::yield_program`): from then on
    /// `clSetKernelArg` records nothing.
    pub records_args: AtomicBool,
    /// Its launches are predicted too short to be worth yielding (the latest planned
    /// one, by `managed::yielding::note_prediction`): kernel objects made meanwhile record
    /// no argument values. Recording cost a paced OpenCV request, which makes a kernel
    /// object of twelve arguments for each of its two launches, 3-9% of its p50 on an
    /// H100 (docs/benchmarks.md, session 42), for launches that never yield.
    pub seems_short: AtomicBool,
    /// Vendor kernels of released kernel objects, for the next `clCreateKernel` of this
    /// name and build (see `core::kernel_pool`).
    pub spares: crate::core::kernel_pool::KernelPool,
    /// Its timing models, per device: the copies the launch path reads (see
    /// `core::managed::models`).
    pub models: std::sync::Arc<crate::core::managed::models::ClassModels>,
    /// Whether it has a required work-group size (`reqd_work_group_size`, an attribute
    /// of its source), asked of the vendor once: a launch with a NULL local size then
    /// runs, and may be cut, with that size (`managed::launch::geometry`).
    pub required_local: once_cell::sync::OnceCell<bool>,
}

impl KernelClass {
    /// A new class with a fresh id.
    pub fn new(
        name: std::sync::Arc<str>,
        arg_kinds: Box<[ArgKind]>,
        sliceable: Sliceable,
        hidden: Option<cl_uint>,
        records_args: bool,
    ) -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);
        KernelClass {
            id: NEXT.fetch_add(1, Relaxed),
            name,
            arg_kinds,
            sliceable,
            hidden,
            short_ns_per_item: AtomicU64::new(0),
            learned_alone: std::sync::atomic::AtomicU32::new(0),
            records_args: AtomicBool::new(records_args),
            seems_short: AtomicBool::new(false),
            spares: Default::default(),
            models: Default::default(),
            required_local: Default::default(),
        }
    }

    /// Whether `clSetKernelArg` records values for this class's kernel objects (those
    /// made to record, [`Kernel::records`]).
    pub fn records_args(&self) -> bool {
        self.records_args.load(Relaxed)
    }

    /// Whether a kernel object made now records its argument values: while the class may
    /// yield and its launches are not known to be short. An object made for one launch
    /// (OpenCV's way) of a kernel whose launches are short then records nothing; one set
    /// once and launched many times (before any launch is known) records from the start.
    pub fn records_for_new(&self) -> bool {
        self.records_args() && !self.seems_short.load(Relaxed)
    }
}

/// Kernel arguments held inline (see [`KernelArgs::held`]).
pub const INLINE_ARGS: usize = 16;

/// What each argument of a kernel object holds.
pub type HeldArgs = smallvec::SmallVec<[Option<HeldArg>; INLINE_ARGS]>;

/// A bit per kernel argument (inline up to 128 arguments).
pub struct ArgBits {
    words: smallvec::SmallVec<[AtomicU64; 2]>,
    count: usize,
}

impl ArgBits {
    pub fn new(count: usize) -> Self {
        let n = count.div_ceil(64);
        let words = if n <= 2 {
            // Made in place: an iterator's collect costs more than the rest of a kernel
            // object's set-up.
            smallvec::SmallVec::from_buf_and_len([AtomicU64::new(0), AtomicU64::new(0)], n)
        } else {
            (0..n).map(|_| AtomicU64::new(0)).collect()
        };
        ArgBits { words, count }
    }

    pub fn set(&self, index: cl_uint, on: bool) {
        let i = index as usize;
        if let Some(w) = self.words.get(i / 64) {
            let bit = 1u64 << (i % 64);
            // Setting an argument again is the common case: a plain load then writes
            // nothing (no locked instruction, no cache line taken).
            if (w.load(Relaxed) & bit != 0) == on {
                return;
            }
            if on {
                w.fetch_or(bit, Relaxed);
            } else {
                w.fetch_and(!bit, Relaxed);
            }
        }
    }

    pub fn get(&self, index: usize) -> bool {
        self.words
            .get(index / 64)
            .is_some_and(|w| w.load(Relaxed) & (1 << (index % 64)) != 0)
    }

    /// Whether every argument is set (checked at every launch: a word at a time).
    pub fn all(&self) -> bool {
        self.words.iter().enumerate().all(|(w, word)| {
            let left = self.count - (w * 64).min(self.count);
            let want = if left >= 64 {
                u64::MAX
            } else {
                (1u64 << left) - 1
            };
            word.load(Relaxed) & want == want
        })
    }

    /// The indices whose bit is set.
    pub fn ones(&self) -> impl Iterator<Item = cl_uint> + '_ {
        (0..self.count)
            .filter(|&i| self.get(i))
            .map(|i| i as cl_uint)
    }

    /// A copy for `clCloneKernel`, whose clone has the same arguments.
    pub fn copy(&self) -> Self {
        let c = ArgBits::new(self.count);
        for (d, s) in c.words.iter().zip(self.words.iter()) {
            d.store(s.load(Relaxed), Relaxed);
        }
        c
    }
}

/// Whether a kernel's launches may be cut into slices. A slice is launched with a global
/// offset, so a kernel that reads `get_group_id`, `get_num_groups`, `get_global_size`,
/// `get_global_offset` (or their 2.0 relatives) would see other values inside a slice.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Sliceable {
    /// Sliceable; with a NULL local size too if `null_local` (the kernel does not depend
    /// on the work-group size, which the vendor may choose differently for a slice).
    Yes { null_local: bool },
    /// Never sliced, and why (logged once per kernel).
    No(String),
}

/// What a kernel argument's value is, as far as handle translation is concerned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ArgKind {
    /// Plain data or a `__local` size: forwarded unchanged.
    Plain,
    /// A global/constant pointer, image or pipe: the value is a `cl_mem`.
    Mem,
    /// `sampler_t`: the value is a `cl_sampler`.
    Sampler,
    /// `queue_t`: the value is a (device) `cl_command_queue`.
    Queue,
    /// No metadata: a pointer-sized value is a handle iff it is a live wrapper of ours.
    Unknown,
}

/// A kernel argument that refers to another wrapped object.
#[derive(Clone)]
pub enum HeldArg {
    Mem(Ref<Mem>),
    Sampler(Ref<Sampler>),
    Queue(Ref<Queue>),
}

pub struct Event {
    pub inner: Inner<cl_event>,
    pub context: Ref<Context>,
    /// `None` for user events.
    pub queue: Option<Ref<Queue>>,
    /// Set for a command that was deferred: `inner` is then a vendor user event that
    /// stands for the command until it has run (see `core::managed::deferred`).
    pub deferred: Option<std::sync::Arc<crate::core::managed::Deferred>>,
}

/// SVM allocations are raw pointers, not objects: this records which context owns one so
/// `clSVMFree` and `clEnqueueSVMFree` callbacks can be routed.
pub struct SvmRecord {
    pub ptr: *mut c_void,
    /// Bytes requested, so a pointer inside the allocation can be traced to its owner.
    pub size: usize,
    pub context: Ref<Context>,
    /// The device memory it holds, returned when the record goes.
    pub charges: super::memory::Charges,
}

// SAFETY: `ptr` is only an address (never dereferenced by the layer); SVM memory is
// shared by all host threads by definition.
unsafe impl Send for SvmRecord {}
// SAFETY: as above; the record is immutable.
unsafe impl Sync for SvmRecord {}

declare_kind!(
    Context,
    cl_context,
    CL_INVALID_CONTEXT,
    0x5350_4358_0000_0001
);
declare_kind!(
    Queue,
    cl_command_queue,
    CL_INVALID_COMMAND_QUEUE,
    0x5350_5155_0000_0002
);
declare_kind!(Mem, cl_mem, CL_INVALID_MEM_OBJECT, 0x5350_4d45_0000_0003);
declare_kind!(
    Sampler,
    cl_sampler,
    CL_INVALID_SAMPLER,
    0x5350_534d_0000_0004
);
declare_kind!(
    Program,
    cl_program,
    CL_INVALID_PROGRAM,
    0x5350_5052_0000_0005
);
declare_kind!(Kernel, cl_kernel, CL_INVALID_KERNEL, 0x5350_4b45_0000_0006);
declare_kind!(Event, cl_event, CL_INVALID_EVENT, 0x5350_4556_0000_0007);

#[cfg(test)]
mod tests {
    use super::ArgBits;

    /// Bits are made in place up to 128 arguments and collected past that: both behave.
    #[test]
    fn arg_bits_of_every_size() {
        for count in [0usize, 1, 3, 64, 65, 128, 129, 300] {
            let b = ArgBits::new(count);
            assert_eq!(b.all(), count == 0, "{count}: none set yet");
            for i in 0..count {
                b.set(i as u32, true);
                // Setting it again changes nothing.
                b.set(i as u32, true);
            }
            assert!(b.all(), "{count}: all set");
            if count > 0 {
                let last = (count - 1) as u32;
                b.set(last, false);
                b.set(last, false);
                assert!(!b.all() && !b.get(count - 1), "{count}: last cleared");
                assert_eq!(b.ones().count(), count - 1, "{count}");
                assert_eq!(b.copy().ones().count(), count - 1, "{count}: copied");
            }
            // Past the count: ignored.
            b.set(count as u32 + 200, true);
            assert!(!b.get(count + 200));
        }
    }
}
