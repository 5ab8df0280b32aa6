//! MSCCL-IR XML (what MSCCLang and msccl-tools write: `<algo>`, a `<gpu>` per rank, a
//! `<tb>` per thread block, a `<step>` per operation) read with roxmltree into the typed
//! program of `topocomm_proto::schedule`, with errors that say where the file is wrong
//! (the element, and the line and column of a value) and what was expected there, never
//! what the file holds: a file named by mistake may hold a secret.

use std::str::FromStr;

use roxmltree::{Document, Node};
use topocomm_proto::schedule::{
    Block, Buffer, Chunks, Gpu, KNOWN_COLLECTIVES, Program, Step, StepKind, collective_named,
};

/// Why an MSCCL-IR file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("malformed XML at line {line}, column {column}: {fault}")]
    Xml { line: u32, column: u32, fault: &'static str },
    #[error("{at}: {reason}")]
    Invalid { at: String, reason: String },
}

fn invalid(at: &str, reason: impl Into<String>) -> ParseError {
    ParseError::Invalid { at: at.to_owned(), reason: reason.into() }
}

/// "line L, column C" of byte `at` of the document `node` is in.
fn position(node: Node, at: usize) -> String {
    let pos = node.document().text_pos_at(at);
    format!("line {}, column {}", pos.row, pos.col)
}

/// Reads attribute `name` of `node` as a whole number `T`; `default` when it is absent
/// (`None`: required).
fn attribute<T: FromStr>(node: Node, name: &str, default: Option<T>, at: &str) -> Result<T, ParseError> {
    match node.attribute_node(name) {
        None => default.ok_or_else(|| invalid(at, format!("the attribute {name} is missing"))),
        Some(found) => found.value().trim().parse().map_err(|_| {
            let kind = if std::any::type_name::<T>().starts_with('i') {
                "a whole number"
            } else {
                "a whole number of 0 or more"
            };
            invalid(
                at,
                format!("the attribute {name} ({}) is not {kind} in range", position(node, found.range_value().start)),
            )
        }),
    }
}

/// A peer or index where -1 means none.
fn optional(value: i64, name: &str, at: &str) -> Result<Option<u32>, ParseError> {
    match value {
        -1 => Ok(None),
        v => u32::try_from(v).map(Some).map_err(|_| invalid(at, format!("{name} is neither -1 nor an index"))),
    }
}

fn buffer(letter: &str, at: &str) -> Result<Buffer, ParseError> {
    match letter.trim() {
        "i" => Ok(Buffer::Input),
        "o" => Ok(Buffer::Output),
        "s" => Ok(Buffer::Scratch),
        _ => Err(invalid(at, "a buffer is not i, o or s")),
    }
}

/// What a malformed document's fault is, in words that quote none of it.
fn xml_fault(error: &roxmltree::Error) -> &'static str {
    use roxmltree::Error;
    match error {
        Error::UnexpectedCloseTag(..) | Error::UnexpectedEntityCloseTag(..) => "a closing tag that does not match",
        Error::UnknownEntityReference(..) | Error::MalformedEntityReference(..) => "an unknown or malformed entity",
        Error::EntityReferenceLoop(..) => "entities that refer to each other",
        Error::InvalidAttributeValue(..) => "an invalid attribute value",
        Error::DuplicatedAttribute(..) => "an attribute given twice",
        Error::NoRootNode => "no root element (is it XML?)",
        Error::UnclosedRootNode => "the root element is not closed",
        Error::DtdDetected => "a DTD, which MSCCL-IR files do not have",
        Error::NodesLimitReached | Error::AttributesLimitReached | Error::NamespacesLimitReached => {
            "more elements or attributes than a document may have"
        }
        Error::InvalidName(..) => "an invalid name",
        Error::NonXmlChar(..) | Error::InvalidChar(..) | Error::InvalidChar2(..) => {
            "a character that is not allowed there"
        }
        Error::UnexpectedEndOfStream => "the file ends inside an element",
        _ => "not well-formed XML",
    }
}

/// The elements of `node` named `name`, refusing any other element.
fn children<'a, 'input>(node: Node<'a, 'input>, name: &str, at: &str) -> Result<Vec<Node<'a, 'input>>, ParseError> {
    let mut found = Vec::new();
    for child in node.children().filter(Node::is_element) {
        match child.tag_name().name() {
            tag if tag == name => found.push(child),
            "op" if name == "step" => {
                return Err(invalid(
                    at,
                    "<op> elements are the newer MSCCL-IR format; write the <step> format (msccl-tools' default, old_format=True)",
                ));
            }
            _ => {
                let here = position(child, child.range().start);
                return Err(invalid(at, format!("an unexpected element at {here} (expected <{name}>)")));
            }
        }
    }
    Ok(found)
}

/// Parses an MSCCL-IR file into a program, checked with [`Program::check`].
pub fn parse(xml: &str) -> Result<Program, ParseError> {
    let document = Document::parse(xml).map_err(|error| {
        let pos = error.pos();
        ParseError::Xml { line: pos.row, column: pos.col, fault: xml_fault(&error) }
    })?;
    let algo = document.root_element();
    if algo.tag_name().name() != "algo" {
        return Err(invalid("the file", "the root element is not <algo>"));
    }
    let name = algo.attribute("name").unwrap_or("unnamed").to_owned();
    let coll = algo.attribute("coll").ok_or_else(|| invalid("the algo", "the attribute coll is missing"))?;
    let collective = collective_named(coll).ok_or_else(|| {
        invalid("the algo", format!("coll names no collective topocomm can verify ({KNOWN_COLLECTIVES})"))
    })?;
    let ngpus: usize = attribute(algo, "ngpus", None, "the algo")?;
    let inplace = attribute::<u8>(algo, "inplace", Some(0), "the algo")? != 0;
    let protocol = algo.attribute("proto").unwrap_or("Simple").to_owned();
    let gpu_nodes = children(algo, "gpu", "the algo")?;
    if gpu_nodes.len() != ngpus {
        return Err(invalid("the algo", format!("ngpus does not match the file's {} <gpu> elements", gpu_nodes.len())));
    }
    let mut gpus: Vec<Option<Gpu>> = vec![None; ngpus];
    let mut largest_channel = 0;
    for gpu_node in gpu_nodes {
        let id: usize = attribute(gpu_node, "id", None, "a gpu")?;
        let here = format!("gpu {id}");
        if id >= ngpus || gpus[id].is_some() {
            return Err(invalid(&here, format!("the id is not one of 0..{ngpus} seen once")));
        }
        let (gpu, channels) = parse_gpu(gpu_node, &here)?;
        largest_channel = largest_channel.max(channels);
        gpus[id] = Some(gpu);
    }
    let gpus: Vec<Gpu> = gpus.into_iter().map(|gpu| gpu.expect("every id seen once")).collect();
    let chunks_default = gpus.iter().map(|gpu| gpu.input_chunks.max(gpu.output_chunks)).max().unwrap_or(0);
    let chunks_per_loop = attribute(algo, "nchunksperloop", Some(chunks_default), "the algo")?;
    let channels = attribute(algo, "nchannels", Some(largest_channel), "the algo")?;
    let program = Program { name, collective, inplace, protocol, chunks_per_loop, channels, gpus };
    program.check().map_err(|error| invalid("the program", error.to_string()))?;
    Ok(program)
}

/// A step as read: its number `s`, the step, and its dependency by (tb id, step).
type NumberedStep = (u32, Step, Option<(u32, u32)>);

/// One `<gpu>`: its buffers' chunk counts and blocks; also one more than its largest channel.
fn parse_gpu(node: Node, here: &str) -> Result<(Gpu, u32), ParseError> {
    let input_chunks = attribute(node, "i_chunks", Some(0), here)?;
    let output_chunks = attribute(node, "o_chunks", Some(0), here)?;
    let scratch_chunks = attribute(node, "s_chunks", Some(0), here)?;
    let mut blocks = Vec::new();
    let mut channels = 0;
    // Dependencies name blocks by id: resolved to positions once every block is read.
    let mut pending: Vec<Vec<Option<(u32, u32)>>> = Vec::new();
    for tb in children(node, "tb", here)? {
        let id: u32 = attribute(tb, "id", None, here)?;
        let at = format!("{here} tb {id}");
        if blocks.iter().any(|block: &Block| block.id == id) {
            return Err(invalid(&at, "a second tb with this id"));
        }
        let send = optional(attribute(tb, "send", Some(-1), &at)?, "send", &at)?;
        let recv = optional(attribute(tb, "recv", Some(-1), &at)?, "recv", &at)?;
        let channel: u32 = attribute(tb, "chan", Some(0), &at)?;
        channels = channels.max(channel + 1);
        let mut steps: Vec<NumberedStep> = Vec::new();
        for step in children(tb, "step", &at)? {
            let s: u32 = attribute(step, "s", None, &at)?;
            let at = format!("{at} step {s}");
            let kind_name = step.attribute("type").ok_or_else(|| invalid(&at, "the attribute type is missing"))?;
            let kind = StepKind::from_name(kind_name).ok_or_else(|| {
                let known: Vec<&str> = StepKind::ALL.iter().map(|(_, name)| *name).collect();
                invalid(&at, format!("the step type is none of those known ({})", known.join(", ")))
            })?;
            let chunks = |buf: &str, off: &str, used: bool| -> Result<Chunks, ParseError> {
                let buffer = buffer(step.attribute(buf).unwrap_or("i"), &at)?;
                let index: i64 = attribute(step, off, Some(-1), &at)?;
                match u32::try_from(index) {
                    Ok(index) => Ok(Chunks { buffer, index }),
                    Err(_) if !used => Ok(Chunks { buffer, index: 0 }),
                    Err(_) => Err(invalid(&at, format!("{off} is not a chunk index"))),
                }
            };
            let src = chunks("srcbuf", "srcoff", kind.reads_src())?;
            let dst = chunks("dstbuf", "dstoff", kind.writes_dst())?;
            let count: u32 = attribute(step, "cnt", Some(1), &at)?;
            let depid = optional(attribute(step, "depid", Some(-1), &at)?, "depid", &at)?;
            let deps = optional(attribute(step, "deps", Some(-1), &at)?, "deps", &at)?;
            let dependency = match (depid, deps) {
                (Some(block), Some(step)) => Some((block, step)),
                (None, None) => None,
                _ => return Err(invalid(&at, "depid and deps must both be -1 or both be set")),
            };
            steps.push((s, Step { kind, src, dst, count, after: None }, dependency));
        }
        steps.sort_by_key(|(s, _, _)| *s);
        if let Some(position) = steps.iter().enumerate().position(|(i, (s, _, _))| *s as usize != i) {
            return Err(invalid(
                &at,
                format!("its steps are not numbered 0, 1, 2, ... (step {position} is missing or repeated)"),
            ));
        }
        pending.push(steps.iter().map(|(_, _, dependency)| *dependency).collect());
        blocks.push(Block { id, send, recv, channel, steps: steps.into_iter().map(|(_, step, _)| step).collect() });
    }
    for (b, dependencies) in pending.into_iter().enumerate() {
        for (s, dependency) in dependencies.into_iter().enumerate() {
            let Some((block_id, step)) = dependency else { continue };
            let position = blocks.iter().position(|block| block.id == block_id).ok_or_else(|| {
                invalid(&format!("{here} tb {} step {s}", blocks[b].id), "depid names no tb of this gpu".to_owned())
            })?;
            blocks[b].steps[s].after = Some((position as u32, step));
        }
    }
    Ok((Gpu { input_chunks, output_chunks, scratch_chunks, blocks }, channels))
}

/// Writes `program` as MSCCL-IR XML (the `<step>` format), so a program read can be
/// written back: `parse(&write(p)) == p`.
pub fn write(program: &Program) -> String {
    let mut xml = format!(
        "<algo name=\"{}\" proto=\"{}\" nchannels=\"{}\" nchunksperloop=\"{}\" ngpus=\"{}\" coll=\"{}\" inplace=\"{}\">\n",
        escape(&program.name),
        escape(&program.protocol),
        program.channels,
        program.chunks_per_loop,
        program.gpus.len(),
        coll_name(program.collective),
        u8::from(program.inplace)
    );
    for (g, gpu) in program.gpus.iter().enumerate() {
        xml.push_str(&format!(
            "  <gpu id=\"{g}\" i_chunks=\"{}\" o_chunks=\"{}\" s_chunks=\"{}\">\n",
            gpu.input_chunks, gpu.output_chunks, gpu.scratch_chunks
        ));
        for (b, block) in gpu.blocks.iter().enumerate() {
            let peer = |peer: Option<u32>| peer.map_or(-1, i64::from);
            xml.push_str(&format!(
                "    <tb id=\"{}\" send=\"{}\" recv=\"{}\" chan=\"{}\">\n",
                block.id,
                peer(block.send),
                peer(block.recv),
                block.channel
            ));
            for (s, step) in block.steps.iter().enumerate() {
                let (depid, deps) = match step.after {
                    Some((b, s)) => (i64::from(gpu.blocks[b as usize].id), i64::from(s)),
                    None => (-1, -1),
                };
                let has_dependents =
                    gpu.blocks.iter().flat_map(|other| &other.steps).any(|o| o.after == Some((b as u32, s as u32)));
                xml.push_str(&format!(
                    "      <step s=\"{s}\" type=\"{}\" srcbuf=\"{}\" srcoff=\"{}\" dstbuf=\"{}\" dstoff=\"{}\" cnt=\"{}\" depid=\"{depid}\" deps=\"{deps}\" hasdep=\"{}\"/>\n",
                    step.kind.name(),
                    step.src.buffer.letter(),
                    step.src.index,
                    step.dst.buffer.letter(),
                    step.dst.index,
                    step.count,
                    u8::from(has_dependents)
                ));
            }
            xml.push_str("    </tb>\n");
        }
        xml.push_str("  </gpu>\n");
    }
    xml.push_str("</algo>\n");
    xml
}

/// The `coll` name MSCCL-IR gives a collective.
pub fn coll_name(collective: topocomm_proto::spec::Collective) -> &'static str {
    use topocomm_proto::spec::Collective;
    match collective {
        Collective::ReduceScatter => "reduce_scatter",
        Collective::Allreduce => "allreduce",
        Collective::Allgather => "allgather",
        Collective::Alltoall => "alltoall",
        Collective::Broadcast => "broadcast",
        Collective::Reduce => "reduce",
        _ => "custom",
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXCHANGE: &str = r#"<algo name="swap" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allgather" inplace="0">
  <gpu id="0" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="1" o_chunks="2" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>"#;

    #[test]
    fn a_program_reads_and_writes_back_the_same() {
        let program = parse(EXCHANGE).unwrap();
        assert_eq!(program.gpus.len(), 2);
        assert_eq!(program.gpus[1].blocks[0].steps[1].dst, Chunks { buffer: Buffer::Output, index: 0 });
        assert_eq!(parse(&write(&program)).unwrap(), program);
    }

    #[test]
    fn malformed_xml_says_where() {
        let error = parse("<algo name=\"x\"><gpu></algo>").unwrap_err().to_string();
        assert_eq!(error, "malformed XML at line 1, column 24: a closing tag that does not match");
    }

    #[test]
    fn an_unknown_step_type_is_named_with_the_known_ones() {
        let error = parse(&EXCHANGE.replace("type=\"cpy\"", "type=\"copy\"")).unwrap_err().to_string();
        assert_eq!(
            error,
            "gpu 0 tb 0 step 2: the step type is none of those known (s, r, rcs, rrc, rrs, rrcs, cpy, re, nop)"
        );
    }

    #[test]
    fn a_chunk_out_of_range_is_named() {
        let error = parse(&EXCHANGE.replacen("dstoff=\"1\"", "dstoff=\"2\"", 1)).unwrap_err().to_string();
        assert_eq!(
            error,
            "the program: gpu 0 tb 0 step 1 (r): dst chunks 2..3 of the output buffer (o) are out of range: it has 2 chunks"
        );
    }

    #[test]
    fn an_unknown_collective_is_refused() {
        let error = parse(&EXCHANGE.replace("coll=\"allgather\"", "coll=\"custom\"")).unwrap_err().to_string();
        assert!(error.contains("coll names no collective topocomm can verify"), "{error}");
    }

    /// A file named by mistake: the error says where and what was expected, never what
    /// the file holds.
    #[test]
    fn an_error_never_quotes_the_file() {
        let secret = "s3cr3tValue";
        for bad in [
            format!("{secret}:x:0:0\n"),
            format!("<{secret}/>"),
            format!("<algo name=\"a\" coll=\"{secret}\" ngpus=\"1\"/>"),
            format!("<algo name=\"a\" coll=\"allreduce\" ngpus=\"{secret}\"/>"),
            format!("<algo coll=\"allreduce\" ngpus=\"1\"><{secret}/></algo>"),
            format!("<algo coll=\"allreduce\" ngpus=\"1\"></{secret}>"),
            format!("<algo coll=\"allreduce\" ngpus=\"1\" x=\"&{secret};\"/>"),
            EXCHANGE.replace("type=\"cpy\"", &format!("type=\"{secret}\"")),
            EXCHANGE.replace("srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n      <step s=\"1\"", &format!("srcbuf=\"{secret}\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n      <step s=\"1\"")),
        ] {
            let error = parse(&bad).unwrap_err().to_string();
            assert!(!error.contains(secret) && !error.contains("s3cr3t"), "{bad}: {error}");
        }
        let error = parse("<algo coll=\"allreduce\" ngpus=\"s3cr3t\"/>").unwrap_err().to_string();
        assert_eq!(
            error,
            "the algo: the attribute ngpus (line 1, column 30) is not a whole number of 0 or more in range"
        );
    }
}
