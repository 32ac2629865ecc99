//! Samplers through the real loader, side by side with bare PoCL.

mod common;

use common::*;
use opencl_sys::cl_icd::cl_icd_dispatch;
use opencl_sys::*;
use std::ffi::c_void;
use std::ptr::null_mut;

fn context(p: cl_platform_id) -> cl_context {
    let d = device(p);
    let mut err = 0;
    // SAFETY: one valid device, no properties.
    let c = unsafe { clCreateContext(std::ptr::null(), 1, &d, None, null_mut(), &mut err) };
    ok(err);
    c
}

fn release_context(c: cl_context) {
    // SAFETY: a context the test owns.
    ok(unsafe { clReleaseContext(c) });
}

fn sampler(
    c: cl_context,
    normalized: cl_bool,
    addressing: cl_addressing_mode,
    filter: cl_filter_mode,
) -> (cl_sampler, cl_int) {
    let mut err = 0;
    // SAFETY: values only; errors come back in `err`.
    #[allow(deprecated)]
    let s = unsafe { clCreateSampler(c, normalized, addressing, filter, &mut err) };
    (s, err)
}

fn sampler_props(c: cl_context, props: &[cl_sampler_properties]) -> (cl_sampler, cl_int) {
    let mut err = 0;
    // SAFETY: a zero-terminated property list.
    let s = unsafe { clCreateSamplerWithProperties(c, props.as_ptr(), &mut err) };
    (s, err)
}

fn sampler_info(s: cl_sampler, q: cl_sampler_info) -> Vec<u8> {
    info_bytes(|sz, v, r| unsafe { clGetSamplerInfo(s, q, sz, v, r) })
}

fn refcount(s: cl_sampler) -> cl_uint {
    info_scalar(|sz, v, r| unsafe { clGetSamplerInfo(s, CL_SAMPLER_REFERENCE_COUNT, sz, v, r) })
}

const QUERIES: [cl_sampler_info; 3] = [
    CL_SAMPLER_NORMALIZED_COORDS,
    CL_SAMPLER_ADDRESSING_MODE,
    CL_SAMPLER_FILTER_MODE,
];

#[test]
fn sampler_info_matches_bare_and_context_is_ours() {
    let mut answers = Vec::new();
    for p in [sp_platform(), bare_platform()] {
        let c = context(p);
        let (s1, err) = sampler(c, CL_TRUE, CL_ADDRESS_CLAMP, CL_FILTER_LINEAR);
        ok(err);
        let props = [
            CL_SAMPLER_NORMALIZED_COORDS as cl_sampler_properties,
            CL_TRUE as cl_sampler_properties,
            CL_SAMPLER_ADDRESSING_MODE as cl_sampler_properties,
            CL_ADDRESS_REPEAT as cl_sampler_properties,
            0,
        ];
        let (s2, err) = sampler_props(c, &props);
        ok(err);
        for s in [s1, s2] {
            let ctx: cl_context = info_scalar(|sz, v, r| unsafe {
                clGetSamplerInfo(s, CL_SAMPLER_CONTEXT, sz, v, r)
            });
            assert_eq!(ctx, c, "CL_SAMPLER_CONTEXT is the app's context");
            answers.push(
                QUERIES
                    .iter()
                    .map(|&q| sampler_info(s, q))
                    .collect::<Vec<_>>(),
            );
        }
        answers.push(vec![sampler_info(s2, CL_SAMPLER_PROPERTIES)]);
        // SAFETY: releasing what was created above.
        unsafe {
            ok(clReleaseSampler(s1));
            ok(clReleaseSampler(s2));
        }
        release_context(c);
    }
    assert_eq!(answers[..3], answers[3..]);
}

#[test]
fn sampler_bad_arguments_match_bare() {
    let run = |p: cl_platform_id| -> Vec<cl_int> {
        let c = context(p);
        let codes = vec![
            sampler(c, CL_TRUE, 0x1234, CL_FILTER_NEAREST).1,
            sampler(c, CL_TRUE, CL_ADDRESS_CLAMP, 0x1234).1,
            sampler_props(c, &[0x7777, 1, 0]).1,
            sampler_props(
                c,
                &[CL_SAMPLER_FILTER_MODE as cl_sampler_properties, 0x1234, 0],
            )
            .1,
        ];
        let (s, err) = sampler(c, CL_FALSE, CL_ADDRESS_NONE, CL_FILTER_NEAREST);
        ok(err);
        let mut small = 0u8;
        let mut codes = codes;
        // SAFETY: a one-byte buffer for a pointer-sized answer, then an unknown name.
        unsafe {
            codes.push(clGetSamplerInfo(
                s,
                CL_SAMPLER_CONTEXT,
                1,
                &mut small as *mut u8 as *mut c_void,
                null_mut(),
            ));
            codes.push(clGetSamplerInfo(s, 0xdead, 0, null_mut(), &mut 0));
            ok(clReleaseSampler(s));
        }
        release_context(c);
        codes
    };
    // "CL_INVALID_VALUE if addressing_mode, filter_mode, normalized_coords or a combination
    // of these arguments are not valid", and for unknown or bad properties. The layer checks
    // these itself: bare PoCL 3.1 accepts the bad enums (its bug) and NVIDIA's driver
    // crashes on them, so only the codes PoCL gets right are compared with it.
    let sp = run(sp_platform());
    assert_eq!(sp, vec![CL_INVALID_VALUE; 6]);
    if vendor_name() == "Portable Computing Language" {
        let bare = run(bare_platform());
        for i in [2, 4, 5] {
            assert_eq!(sp[i], bare[i], "code {i}");
        }
    }
}

#[test]
fn sampler_reference_counts_match_bare() {
    let counts: Vec<Vec<cl_uint>> = [sp_platform(), bare_platform()]
        .iter()
        .map(|&p| {
            let c = context(p);
            let (s, err) = sampler(c, CL_FALSE, CL_ADDRESS_NONE, CL_FILTER_NEAREST);
            ok(err);
            let mut v = vec![refcount(s)];
            // SAFETY: retains/releases of a live sampler the test owns.
            unsafe {
                ok(clRetainSampler(s));
                ok(clRetainSampler(s));
                v.push(refcount(s));
                ok(clReleaseSampler(s));
                v.push(refcount(s));
                ok(clReleaseSampler(s));
                ok(clReleaseSampler(s));
            }
            release_context(c);
            v
        })
        .collect();
    assert_eq!(counts[0], counts[1]);
    assert_eq!(counts[0], [1, 3, 2]);
}

/// NULL, a stack address, a bare-PoCL sampler, a released sampler and a context passed as
/// a sampler all get CL_INVALID_SAMPLER; a bad context gets CL_INVALID_CONTEXT.
#[test]
fn invalid_sampler_handles() {
    let c = context(sp_platform());
    let bare = context(bare_platform());
    let (bare_s, err) = sampler(bare, CL_FALSE, CL_ADDRESS_NONE, CL_FILTER_NEAREST);
    ok(err);
    // SAFETY: our dispatch table, read from our context exactly as the loader reads it;
    // calls through it reach the layer whatever the first argument is.
    let t = unsafe { &**(c as *const *const cl_icd_dispatch) };
    let mut stack = [0usize; 8];
    let check = |s: cl_sampler, what: &str| {
        let mut out = [0u8; 16];
        // SAFETY: through our table; the layer must reject `s` unread.
        unsafe {
            let info = t.clGetSamplerInfo.unwrap()(
                s,
                CL_SAMPLER_FILTER_MODE,
                16,
                out.as_mut_ptr() as *mut c_void,
                null_mut(),
            );
            assert_eq!(info, CL_INVALID_SAMPLER, "{what}");
            assert_eq!(t.clRetainSampler.unwrap()(s), CL_INVALID_SAMPLER, "{what}");
            assert_eq!(t.clReleaseSampler.unwrap()(s), CL_INVALID_SAMPLER, "{what}");
        }
    };
    check(null_mut(), "NULL");
    check(stack.as_mut_ptr() as cl_sampler, "stack address");
    check(bare_s, "bare PoCL sampler");
    check(c as cl_sampler, "context as sampler");
    let (gone, err) = sampler(c, CL_FALSE, CL_ADDRESS_NONE, CL_FILTER_NEAREST);
    ok(err);
    // SAFETY: the only reference, then a use after release on purpose (via the loader,
    // which still routes the dead wrapper to us).
    unsafe {
        ok(clReleaseSampler(gone));
        assert_eq!(clRetainSampler(gone), CL_INVALID_SAMPLER);
    }
    check(gone, "released sampler");
    let mut err = 0;
    for bad in [null_mut(), stack.as_mut_ptr() as cl_context, bare] {
        // SAFETY: through our table; the layer must reject `bad` unread.
        unsafe {
            assert!(t.clCreateSampler.unwrap()(
                bad,
                CL_FALSE,
                CL_ADDRESS_NONE,
                CL_FILTER_NEAREST,
                &mut err
            )
            .is_null());
            assert_eq!(err, CL_INVALID_CONTEXT);
            assert!(
                t.clCreateSamplerWithProperties.unwrap()(bad, std::ptr::null(), &mut err).is_null()
            );
            assert_eq!(err, CL_INVALID_CONTEXT);
        }
    }
    // SAFETY: releasing what the test created.
    unsafe { ok(clReleaseSampler(bare_s)) };
    release_context(bare);
    release_context(c);
}
