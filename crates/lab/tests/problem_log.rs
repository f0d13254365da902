//! Tests for the XML problem-log reader: it must count only `<problem>` elements and survive
//! the truncated or odd logs a killed or buggy checker leaves behind.

use ffsck_lab::problem_log::{format_code, parse};

#[test]
fn reads_e2fsck_log() {
    let text = r#"<?xml version="1.0" encoding="utf-8"?>
<problem_log time="1795313997">
<invocation prog="e2fsck" arg1="-fn" arg2="a.img"/>
<problem code="0x00003e" answer="0" group="0" csum1="18943"/>
<header code="0x010000"/>
<problem code="0x050014" answer="0" blk="8" blk2="10"/>
<problem code="0x050014" answer="0" blk="12" blk2="17"/>
</problem_log>"#;
    let log = parse(text);
    assert_eq!(log.codes, vec![0x3e, 0x050014, 0x050014]);
    assert_eq!(log.malformed, 0);
    assert_eq!(
        log.code_set().into_iter().collect::<Vec<_>>(),
        vec![0x3e, 0x050014]
    );
}

#[test]
fn headers_and_root_are_not_problems() {
    let log = parse(r#"<problem_log><header code="0x010000"/></problem_log>"#);
    assert!(log.codes.is_empty());
    assert_eq!(log.malformed, 0);
}

#[test]
fn attribute_order_quotes_and_spacing_do_not_matter() {
    let text = "<problem answer='1' code = '0X01002A'/><problem\n  str=\"a>b\" code=\"0x2\" >";
    assert_eq!(parse(text).codes, vec![0x01002a, 0x2]);
}

#[test]
fn truncated_and_bad_elements_are_counted_not_fatal() {
    // The last element was cut off mid-value when the checker was killed.
    let text = r#"<problem code="0x010001"/><problem code="zz"/><problem answer="0"/><problem code="0x0100"#;
    let log = parse(text);
    assert_eq!(log.codes, vec![0x010001]);
    assert_eq!(log.malformed, 3);
}

#[test]
fn empty_or_garbage_input() {
    assert_eq!(parse("").codes, Vec::<u32>::new());
    // Cut off right after the name: nothing to tell it from `<problem_log`, so not counted.
    assert_eq!(parse("<<<problem").malformed, 0);
    assert_eq!(parse("\u{0}\u{ffff}<problem ").malformed, 1);
}

#[test]
fn codes_print_like_problem_h() {
    assert_eq!(format_code(0x010026), "0x010026");
    assert_eq!(format_code(0x3e), "0x00003e");
}
