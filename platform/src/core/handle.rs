//! Wrapper objects handed to the application, and the checked helpers that turn a raw
//! handle back into a Rust reference.
//!
//! Every wrapper lives in a per-kind [`Pool`]: chunks of slots that are never returned to
//! the allocator. That is what makes a *foreign* or *released* handle safe to check: a
//! pointer outside every chunk is rejected without being read, and a released slot keeps
//! its memory but carries a dead tag. Freed slots are reused in FIFO order, so a stale
//! handle is unlikely to alias a fresh object of the same kind soon after its release.

use super::cl::cl_icd_dispatch;
use crossbeam_queue::SegQueue;
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use super::error::{CLResult, Code};

/// The layer's own dispatch table, installed by the `icd` crate before any wrapper exists.
static OUR_DISPATCH: AtomicPtr<cl_icd_dispatch> = AtomicPtr::new(ptr::null_mut());

/// Called once by the cdylib with its static table.
pub fn install_dispatch(table: &'static cl_icd_dispatch) {
    OUR_DISPATCH.store(table as *const _ as *mut _, Ordering::Release);
}

pub(crate) fn our_dispatch() -> *const cl_icd_dispatch {
    OUR_DISPATCH.load(Ordering::Acquire)
}

/// A kind of OpenCL object: what its handle type is and which error a bad handle gets.
pub trait Kind: Sized + Send + Sync + 'static {
    /// The raw OpenCL handle type (`cl_mem`, ...).
    type Handle: Copy;
    /// `CL_INVALID_<KIND>`.
    const INVALID: Code;
    /// Distinguishes kinds; a live slot carries it, a dead one carries `DEAD_TAG`.
    const TAG: u64;
    fn pool() -> &'static Pool<Self>;
    fn to_handle(p: *mut Obj<Self>) -> Self::Handle;
    fn from_handle(h: Self::Handle) -> *mut c_void;
}

const DEAD_TAG: u64 = 0x5350_4445_4144_0000; // "SPDEAD"

/// The object behind every handle. The first two fields are what the ICD loader reads
/// (`dispatch`, then cl_khr_icd 2.0 `dispatch_data`); `tag` makes kind checks possible.
#[repr(C)]
pub struct Obj<T: Kind> {
    dispatch: *const cl_icd_dispatch,
    dispatch_data: *mut c_void,
    tag: AtomicU64,
    /// Application references plus internal holds (children keep their parent alive).
    refs: AtomicUsize,
    /// Application-visible references: retain/release calls are mirrored onto the inner
    /// object one for one, so the vendor's own count stays exactly what it would be bare.
    app_refs: AtomicUsize,
    data: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: `data` is written only while the slot is exclusively owned (allocation, final
// release); everything else reads it through `&T`, and `T: Sync`.
unsafe impl<T: Kind> Sync for Obj<T> {}
// SAFETY: as above; the raw pointers are immutable after allocation.
unsafe impl<T: Kind> Send for Obj<T> {}

impl<T: Kind> Obj<T> {
    /// The wrapped value. Valid while the slot is live, which the caller proved by
    /// holding a `Ref` or by a successful [`Obj::check`].
    pub fn get(&self) -> &T {
        // SAFETY: a live slot's data was initialised before its tag was published, and is
        // only dropped after the last reference is gone.
        unsafe { (*self.data.get()).assume_init_ref() }
    }

    /// Narrows an application handle to a live object of this kind.
    ///
    /// This is the one place where an untrusted pointer is turned into a reference.
    pub fn check<'a>(h: T::Handle) -> CLResult<&'a Obj<T>> {
        let raw = T::from_handle(h) as usize;
        let pool = T::pool();
        if !pool.contains(raw) {
            return Err(T::INVALID);
        }
        // SAFETY: `contains` proved `raw` is the start of a slot inside one of our chunks,
        // which are never freed; the tag is atomic, so reading it is sound even if the
        // slot is concurrently released.
        let obj = unsafe { &*(raw as *const Obj<T>) };
        if obj.tag.load(Ordering::Acquire) != T::TAG || obj.refs.load(Ordering::Acquire) == 0 {
            return Err(T::INVALID);
        }
        Ok(obj)
    }

    /// Like [`Obj::check`], but NULL is allowed and gives `None`.
    pub fn check_opt<'a>(h: T::Handle) -> CLResult<Option<&'a Obj<T>>> {
        if T::from_handle(h).is_null() {
            Ok(None)
        } else {
            Self::check(h).map(Some)
        }
    }

    pub fn handle(&self) -> T::Handle {
        T::to_handle(self as *const _ as *mut _)
    }

    /// An internal strong reference (not visible to the application).
    pub fn hold(&self) -> Ref<T> {
        self.refs.fetch_add(1, Ordering::Relaxed);
        Ref {
            ptr: self as *const _ as *mut _,
            _p: PhantomData,
        }
    }

    /// The application retained its handle.
    pub fn app_retain(&self) {
        self.app_refs.fetch_add(1, Ordering::Relaxed);
        self.refs.fetch_add(1, Ordering::Relaxed);
    }

    /// The application released its handle. Returns `Err` for a release without a
    /// matching retain; otherwise drops one reference (maybe the last).
    pub fn app_release(&self) -> CLResult<()> {
        self.app_release_left().map(drop)
    }

    /// [`Obj::app_release`], saying how many application references are left: of several
    /// releases on several threads exactly one sees 0.
    pub fn app_release_left(&self) -> CLResult<usize> {
        let mut cur = self.app_refs.load(Ordering::Relaxed);
        loop {
            if cur == 0 {
                return Err(T::INVALID);
            }
            match self.app_refs.compare_exchange_weak(
                cur,
                cur - 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(v) => cur = v,
            }
        }
        drop(Ref::<T> {
            ptr: self as *const _ as *mut _,
            _p: PhantomData,
        });
        Ok(cur - 1)
    }

    /// Application references left (for release decisions that depend on it).
    pub fn app_refs(&self) -> usize {
        self.app_refs.load(Ordering::Acquire)
    }
}

/// Allocates a wrapper around `value` with one application reference and returns it.
pub fn new_obj<T: Kind>(value: T) -> &'static Obj<T> {
    T::pool().alloc(value)
}

/// A counted internal reference to a wrapper.
pub struct Ref<T: Kind> {
    ptr: *mut Obj<T>,
    _p: PhantomData<T>,
}

// SAFETY: `Obj<T>` is Sync, and a Ref only shares it.
unsafe impl<T: Kind> Send for Ref<T> {}
// SAFETY: as above.
unsafe impl<T: Kind> Sync for Ref<T> {}

impl<T: Kind> Deref for Ref<T> {
    type Target = Obj<T>;
    fn deref(&self) -> &Obj<T> {
        // SAFETY: a Ref counts as a reference, so the slot is live.
        unsafe { &*self.ptr }
    }
}

impl<T: Kind> Clone for Ref<T> {
    fn clone(&self) -> Self {
        self.hold()
    }
}

impl<T: Kind> Drop for Ref<T> {
    fn drop(&mut self) {
        // SAFETY: we own one count, so the slot is live until we give it up below.
        let obj = unsafe { &*self.ptr };
        if obj.refs.fetch_sub(1, Ordering::AcqRel) == 1 {
            T::pool().free(self.ptr);
        }
    }
}

impl<T: Kind> PartialEq for Ref<T> {
    fn eq(&self, other: &Self) -> bool {
        self.ptr == other.ptr
    }
}

impl<T: Kind> std::fmt::Debug for Ref<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ref({:p})", self.ptr)
    }
}

const MAX_CHUNKS: usize = 40;
const FIRST_CHUNK: usize = 64;

/// Slots of one kind. Chunk `i` holds `FIRST_CHUNK << min(i, 16)` slots.
pub struct Pool<T: Kind> {
    chunks: [AtomicPtr<Obj<T>>; MAX_CHUNKS],
    n_chunks: AtomicUsize,
    free: SegQueue<usize>,
    grow: Mutex<()>,
}

impl<T: Kind> Pool<T> {
    #[allow(clippy::new_without_default)]
    pub const fn new() -> Self {
        Pool {
            chunks: [const { AtomicPtr::new(ptr::null_mut()) }; MAX_CHUNKS],
            n_chunks: AtomicUsize::new(0),
            free: SegQueue::new(),
            grow: Mutex::new(()),
        }
    }

    fn chunk_len(i: usize) -> usize {
        FIRST_CHUNK << i.min(16)
    }

    /// Whether `addr` is exactly the start of a slot of this pool.
    fn contains(&self, addr: usize) -> bool {
        let size = std::mem::size_of::<Obj<T>>();
        let n = self.n_chunks.load(Ordering::Acquire);
        for (i, c) in self.chunks[..n].iter().enumerate() {
            let base = c.load(Ordering::Acquire) as usize;
            let end = base + Self::chunk_len(i) * size;
            if addr >= base && addr < end {
                return (addr - base).is_multiple_of(size);
            }
        }
        false
    }

    fn alloc(&self, value: T) -> &'static Obj<T> {
        let slot = match self.free.pop() {
            Some(p) => p as *mut Obj<T>,
            None => self.grow_and_take(),
        };
        // SAFETY: the slot came off the free list (or a fresh chunk), so nobody else owns
        // it; its tag is dead, so concurrent `check`s reject it until we publish below.
        unsafe {
            let obj = &*slot;
            (*obj.data.get()).write(value);
            ptr::addr_of_mut!((*slot).dispatch).write(our_dispatch());
            obj.app_refs.store(1, Ordering::Relaxed);
            obj.refs.store(1, Ordering::Relaxed);
            obj.tag.store(T::TAG, Ordering::Release);
            obj
        }
    }

    #[cold]
    fn grow_and_take(&self) -> *mut Obj<T> {
        let _g = self.grow.lock().unwrap_or_else(|e| e.into_inner());
        // Another thread may have grown the pool while we waited.
        if let Some(p) = self.free.pop() {
            return p as *mut Obj<T>;
        }
        let i = self.n_chunks.load(Ordering::Acquire);
        assert!(i < MAX_CHUNKS, "SoftPreempt object pool exhausted");
        let len = Self::chunk_len(i);
        let mut v: Vec<Obj<T>> = Vec::with_capacity(len);
        for _ in 0..len {
            v.push(Obj {
                dispatch: our_dispatch(),
                dispatch_data: ptr::null_mut(),
                tag: AtomicU64::new(DEAD_TAG),
                refs: AtomicUsize::new(0),
                app_refs: AtomicUsize::new(0),
                data: UnsafeCell::new(MaybeUninit::uninit()),
            });
        }
        // Chunks are never freed: leaking is the point (see the module docs).
        let base = Box::leak(v.into_boxed_slice()).as_mut_ptr();
        self.chunks[i].store(base, Ordering::Release);
        self.n_chunks.store(i + 1, Ordering::Release);
        for k in 1..len {
            // SAFETY: `k < len`, inside the chunk just allocated.
            self.free.push(unsafe { base.add(k) } as usize);
        }
        base
    }

    fn free(&self, slot: *mut Obj<T>) {
        // SAFETY: called once, by the holder of the last reference.
        unsafe {
            let obj = &*slot;
            obj.tag.store(DEAD_TAG, Ordering::Release);
            (*obj.data.get()).assume_init_drop();
        }
        self.free.push(slot as usize);
    }
}

/// Declares a kind: its handle type, error code and pool.
#[macro_export]
macro_rules! declare_kind {
    ($t:ty, $handle:ty, $invalid:expr, $tag:expr) => {
        impl $crate::core::handle::Kind for $t {
            type Handle = $handle;
            const INVALID: $crate::core::error::Code = $invalid;
            const TAG: u64 = $tag;
            fn pool() -> &'static $crate::core::handle::Pool<Self> {
                static POOL: $crate::core::handle::Pool<$t> = $crate::core::handle::Pool::new();
                &POOL
            }
            fn to_handle(p: *mut $crate::core::handle::Obj<Self>) -> $handle {
                p as $handle
            }
            fn from_handle(h: $handle) -> *mut std::ffi::c_void {
                h as *mut std::ffi::c_void
            }
        }
    };
}
