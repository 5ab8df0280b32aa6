//! The link physics of emulated runs, as a layer between the router and its links: a
//! message costs t_s + t_w·m per link it crosses and t_h per hop, links carry one
//! transfer at a time per direction (contention), store-and-forward passes a message on
//! once its tail has arrived, cut-through once its head has (whole, or in `--packet`
//! packets). Hockney's model as [GGKK 4] states it: [`LinkModel`] holds the numbers.
//!
//! How it runs: a frame is stamped as it leaves a link with the instant its tail
//! reaches the peer on the emulated timeline (`due_ns`, [`Emulation::depart`]) and goes
//! out at once; the peer holds a frame for itself until then ([`Emulation::hold`]) and
//! hands one to pass on to its next link at once, where it waits for its turn: its head
//! ready, scheduled from its due time ([`Emulation::head_ready`], [`super::departures`]:
//! a link serves frames in the order they became ready, as the simulator's do). So the
//! real transfer and the receiver's wake-up happen while the emulated link is busy, and
//! the schedule's instants come from the model, never from when a write happened to
//! finish: timing errors do not add up. Outside emulated runs every step here is a no-op.
//!
//! Under the one-port model ([`Ports::One`]) the node's links share one output port and
//! one input port, kept here for the whole node rather than by each link: a frame leaves
//! once both its link and the output port are free ([`sender_free_ns`]), and is in once
//! the input port has taken the frames that came before it ([`received_ns`]); each
//! message through a port is a step after the last ([`port_step`]). The same rules the
//! simulator applies, served in the order frames reach the ports here.

use std::collections::HashMap;
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use tokio::time::Instant;
use topocomm_proto::frame::{FrameHeader, SYSTEM_TAG_BASE};
use topocomm_proto::spec::{LinkModel, Ports};
use topocomm_proto::{NodeId, Topology};

use topocomm_collectives::comm::fault::LinkFault;
use topocomm_collectives::comm::payload::Payload;
use topocomm_collectives::physics::{
    first_link_model, head_ready_ns, link_free_ns, occupancy_ns, port_step, ready_after, received_ns, sender_free_ns,
    split_into_packets,
};

use super::Outgoing;
use crate::transport::pacing::{Clock, Timeline};

/// The physics of one node's links for the run in progress.
pub struct Emulation {
    /// The link physics of the current run (`None`: full speed).
    model: RwLock<Option<LinkModel>>,
    /// How far ahead of now an emulated frame may be due: the run's deadline (`None`
    /// outside a run, as in the cost model, whose virtual links may queue far ahead).
    due_horizon: RwLock<Option<Duration>>,
    /// The timeline emulated frames are stamped on (the clock delays are measured on).
    timeline: RwLock<Timeline>,
    /// Each link's own physics, where link classes differ (`--class`).
    links: RwLock<LinkModels>,
    /// The node's two ports under one-port (unused under all-port), made anew each run.
    ports: Mutex<NodePorts>,
}

/// The physics of each of a node's links where its links' classes have physics of their
/// own (`proto::spec::class_models`): the link a frame of each flow leaves on, and the
/// link from each neighbour. A link neither names has the run's model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkModels {
    /// The links a frame may leave on (`None`: every one has the run's model).
    pub toward: Option<Toward>,
    /// By neighbour: the model of the link from it.
    pub from: HashMap<NodeId, LinkModel>,
}

/// Where a node's frames go, and each class's model: the model of the link a frame leaves
/// on is that of the next hop of its flow's route (its t_s the one a message of that flow
/// starts up with here, if it starts here: [`first_link_model`]), as the simulator has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Toward {
    pub id: NodeId,
    pub topology: Topology,
    /// By class id.
    pub classes: Vec<LinkModel>,
}

/// A one-port node's output and input ports: when each is next free (instants, like
/// [`Occupancy`]; `None`: free), and the step of the last message through each in the
/// iteration `iteration` (steps count from 1 again in each iteration).
#[derive(Debug, Default, Clone, Copy)]
struct NodePorts {
    output_free_at: Option<Instant>,
    input_free_at: Option<Instant>,
    iteration: u32,
    output_step: u16,
    input_step: u16,
}

impl NodePorts {
    /// The steps of the last messages through the ports, output and input, in the
    /// iteration of `header`: from 0 when it is a later iteration than the last; `None`
    /// for a frame of an earlier one, which counts no step.
    fn steps(&mut self, header: &FrameHeader) -> Option<(&mut u16, &mut u16)> {
        if header.iteration > self.iteration {
            (self.iteration, self.output_step, self.input_step) = (header.iteration, 0, 0);
        }
        (header.iteration == self.iteration).then_some((&mut self.output_step, &mut self.input_step))
    }
}

/// When an emulated link (one direction of it) is next free: each link's writer keeps
/// one and hands it to [`Emulation::depart`] with every frame. An instant, not a reading
/// of the timeline: it outlives the run, and the next run may read the timeline
/// differently (another clock offset, another dilation).
#[derive(Debug, Clone, Copy)]
pub struct Occupancy {
    free_at: Instant,
}

impl Default for Occupancy {
    fn default() -> Self {
        Occupancy { free_at: Instant::now() }
    }
}

impl Emulation {
    /// Full speed, with emulated delays measured on `timeline` once a run sets a model.
    pub fn new(timeline: Timeline) -> Self {
        Emulation {
            model: RwLock::new(None),
            due_horizon: RwLock::new(None),
            timeline: RwLock::new(timeline),
            links: RwLock::default(),
            ports: Mutex::new(NodePorts::default()),
        }
    }

    /// Sets each link's own physics for the run that starts ([`LinkModels`]; empty:
    /// every link has the run's model).
    pub fn set_links(&self, links: LinkModels) {
        *self.links.write().expect("link models lock") = links;
    }

    /// The physics of the link a frame of `header`'s flow leaves on, if links are emulated.
    fn model_toward(&self, header: &FrameHeader) -> Option<LinkModel> {
        let model = self.model()?;
        let links = self.links.read().expect("link models lock");
        Some(match &links.toward {
            Some(toward) if header.dst() != toward.id => {
                first_link_model(&toward.topology, &toward.classes, toward.id, header.flow())
            }
            _ => model,
        })
    }

    /// The physics of the link from neighbour `peer`, if links are emulated.
    fn model_from(&self, peer: NodeId) -> Option<LinkModel> {
        let model = self.model()?;
        Some(self.links.read().expect("link models lock").from.get(&peer).copied().unwrap_or(model))
    }

    /// Sets the link physics for the run that starts (`None`: full speed), and this
    /// node's clock offset from the coordinator's (how its timeline reads).
    pub fn set(&self, model: Option<LinkModel>, clock_offset_ns: i64) {
        *self.model.write().expect("emulation lock") = model;
        *self.ports.lock().expect("ports lock") = NodePorts::default();
        let mut timeline = self.timeline.write().expect("timeline lock");
        *timeline = timeline.with_offset(clock_offset_ns);
    }

    /// Sets how far ahead of now an emulated frame may be due (the run's per-iteration
    /// deadline): a frame due later is refused, never held.
    pub fn set_due_horizon(&self, horizon: Duration) {
        *self.due_horizon.write().expect("horizon lock") = Some(horizon);
    }

    /// The link physics in force, if any.
    pub fn model(&self) -> Option<LinkModel> {
        *self.model.read().expect("emulation lock")
    }

    /// Whether links are emulated now.
    pub fn is_on(&self) -> bool {
        self.model().is_some()
    }

    /// The timeline emulated frames are stamped on.
    pub fn timeline(&self) -> Timeline {
        *self.timeline.read().expect("timeline lock")
    }

    /// The clock emulated delays are measured on.
    pub fn clock(&self) -> Clock {
        self.timeline().clock()
    }

    /// When a message this node sends is ready to go: at `causal` (when its schedule let
    /// it go, see `Comm`), or now if the software got there later than t_s allows; now
    /// when links are not emulated or the sender has no schedule instant.
    pub fn source_ready(&self, causal: Option<Instant>) -> Instant {
        match (causal, self.model()) {
            (Some(causal), Some(model)) => self.ready_from(causal, model.ts_ns),
            _ => Instant::now(),
        }
    }

    /// When a frame that passes through this node, come in from `from`, is ready to go
    /// on: when its tail arrived here (`header.due_ns`), or now if the software got there
    /// later than the t_h of the link it came over allows; now when it carries no due time.
    pub fn hop_ready(&self, header: &FrameHeader, from: NodeId) -> Instant {
        match self.model_from(from).filter(|_| header.due_ns > 0) {
            Some(model) => self.ready_from(self.timeline().stamped(header.due_ns), model.th_ns),
            None => Instant::now(),
        }
    }

    /// The due time of a message this node sends to itself: when it was ready (0 when
    /// links are not emulated).
    pub fn self_due_ns(&self, ready_at: Instant) -> u64 {
        if self.is_on() { self.timeline().stamp(ready_at) } else { 0 }
    }

    /// Under cut-through with packets, the packets an algorithm message leaves in (each
    /// hop passes them on as they arrive), in order; `Err` gives the payload back when
    /// the message leaves whole.
    pub fn packets(&self, header: FrameHeader, payload: Payload) -> Result<Vec<(FrameHeader, Payload)>, Payload> {
        split_into_packets(self.model(), header, payload)
    }

    /// The model in force for an algorithm frame under one-port, if both.
    fn one_port(&self, header: &FrameHeader) -> Option<LinkModel> {
        self.model().filter(|model| model.ports == Ports::One && header.tag < SYSTEM_TAG_BASE)
    }

    /// The step of a message this node sends to another: under one-port, one after the
    /// last through its output port ([`port_step`]); its own otherwise.
    pub fn source_step(&self, header: &mut FrameHeader) {
        if self.one_port(header).is_some() {
            let mut ports = self.ports.lock().expect("ports lock");
            if let Some((output_step, _)) = ports.steps(header) {
                header.step = port_step(Ports::One, header.step, *output_step);
                *output_step = header.step;
            }
        }
    }

    /// When the head of a frame waiting for its link is ready to go ([`head_ready_ns`],
    /// as the simulator has it: its `ready_at`, less t_w · m for a message an
    /// intermediate node cuts through whole); `None` when links are not emulated.
    pub fn head_ready(&self, outgoing: &Outgoing) -> Option<Instant> {
        let model = self.model_toward(&outgoing.header)?;
        if outgoing.header.tag >= SYSTEM_TAG_BASE {
            return Some(outgoing.ready_at);
        }
        let timeline = self.timeline();
        let ready_ns = timeline.ns(outgoing.ready_at);
        Some(timeline.instant(head_ready_ns(&model, &outgoing.header, outgoing.payload.len(), ready_ns)))
    }

    /// Stamps an algorithm frame leaving a link free from `occupancy` with the instant
    /// its tail reaches the peer ([`link_free_ns`]), and marks the link busy until then
    /// (and under one-port the node's output port, which it waited for too).
    pub fn depart(&self, occupancy: &mut Occupancy, outgoing: &mut Outgoing) {
        let Some(model) = self.model_toward(&outgoing.header).filter(|_| outgoing.header.tag < SYSTEM_TAG_BASE) else {
            return;
        };
        let timeline = self.timeline();
        let header = &outgoing.header;
        let ready_ns = timeline.ns(outgoing.ready_at);
        let link_free = timeline.ns(occupancy.free_at);
        let free_ns = match model.ports {
            Ports::All => link_free_ns(&model, header, outgoing.payload.len(), ready_ns, link_free),
            Ports::One => {
                let mut ports = self.ports.lock().expect("ports lock");
                let port_free = ports.output_free_at.map_or(0, |at| timeline.ns(at));
                let free = sender_free_ns(Ports::One, link_free, port_free);
                let free_ns = link_free_ns(&model, header, outgoing.payload.len(), ready_ns, free);
                ports.output_free_at = Some(timeline.instant(free_ns));
                free_ns
            }
        };
        occupancy.free_at = timeline.instant(free_ns);
        // Never due before it is written (a writer that ran late delays it).
        outgoing.header.due_ns = timeline.stamp(timeline.instant(free_ns).max(Instant::now()));
    }

    /// Under one-port, an algorithm frame that came in over a link is taken by the node's
    /// input port one after the frames before it ([`received_ns`]): its due time moves to
    /// when the port has it in, which frees the port. Nothing under all-port.
    pub fn receive(&self, header: &mut FrameHeader, payload_len: usize) {
        let Some(model) = self.one_port(header).filter(|_| header.due_ns > 0) else {
            return;
        };
        let timeline = self.timeline();
        let arrival_ns = timeline.ns(timeline.stamped(header.due_ns));
        let mut ports = self.ports.lock().expect("ports lock");
        let port_free = ports.input_free_at.map_or(0, |at| timeline.ns(at));
        let in_ns = received_ns(Ports::One, arrival_ns, occupancy_ns(&model, header, payload_len), port_free);
        let in_at = timeline.instant(in_ns);
        ports.input_free_at = Some(in_at);
        if in_ns > arrival_ns {
            header.due_ns = timeline.stamp(in_at);
        }
    }

    /// The step of a message for node `me` whose last frame was released: under one-port,
    /// one after the last its input port took ([`port_step`]).
    pub fn delivered_step(&self, me: NodeId, header: &mut FrameHeader) {
        if header.dst() == me && header.last && self.one_port(header).is_some() {
            let mut ports = self.ports.lock().expect("ports lock");
            if let Some((_, input_step)) = ports.steps(header) {
                header.step = port_step(Ports::One, header.step, *input_step);
                *input_step = header.step;
            }
        }
    }

    /// An emulated frame for node `me` travelled ahead of its time: it is released when
    /// its tail is due, as a network emulator releases a packet. One to forward goes on
    /// at once to its next link, which holds it until its turn, scheduled from its due
    /// time ([`super::departures`]), so no hop adds its real latency to the emulated one.
    /// A frame due beyond the run's deadline is no frame of this run (or a forged one):
    /// refused, not held in memory until then (here or in a link).
    pub async fn hold(&self, me: NodeId, from: NodeId, header: &FrameHeader) -> Result<(), LinkFault> {
        if header.due_ns == 0 || header.tag >= SYSTEM_TAG_BASE {
            return Ok(());
        }
        let timeline = self.timeline();
        let due = timeline.stamped(header.due_ns);
        let horizon = *self.due_horizon.read().expect("horizon lock");
        if let Some(horizon) = horizon
            && Instant::now().checked_add(horizon).is_none_or(|latest| due > latest)
        {
            return Err(LinkFault::DueBeyondDeadline {
                peer: from,
                due_ms: due.saturating_duration_since(Instant::now()).as_millis() as u64,
                horizon_ms: horizon.as_millis() as u64,
            });
        }
        if header.dst() != me {
            return Ok(());
        }
        timeline.clock().wait_until(due).await;
        tracing::trace!(late_us = crate::transport::pacing::late_us(due), "released");
        Ok(())
    }

    /// When a frame whose emulated schedule lets it go at `due` is ready to go, now that
    /// the software got to it: software time up to `slack_ns` (t_s at the source, t_h at
    /// a hop: the costs that stand for it in the model) hides inside the emulated time;
    /// beyond that it delays the frame, and the wire time t_w·m is never hidden.
    fn ready_from(&self, due: Instant, slack_ns: u64) -> Instant {
        let timeline = self.timeline();
        timeline.instant(ready_after(timeline.ns(due), timeline.ns(Instant::now()), slack_ns))
    }
}
