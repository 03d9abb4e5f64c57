// Broker, the relay of pbt checkpoints between agents (issue 29;
// docs/protocol.md, CHECKPOINT_PULL and CHECKPOINT_PART). An agent about to
// start a member's segment pulls the checkpoint another agent holds; the
// broker passes each pull to that agent and each part back, and nothing
// else: only between the agents its own records name (the attempt running
// on the puller, the segment ended on the holder, both of one sweep), so a
// registered agent can read no checkpoint but those of the sweep it runs a
// member of, and every hop is an authenticated session. A part's bytes come
// as a frame of their own and leave as one: the broker reads the part's
// small JSON header to check it, and copies the bytes, never parses them.
// It keeps no state of a transfer. A pull whose holder is not connected is not answered: the
// puller sends it again every 2 s (agent/agent_pull.cpp), so a holder that
// comes back (a restarted agent, a healed link) serves it, and one that does
// not within the puller's 60 s ends the start (launch_failed), after which
// the member reruns from its own checkpoint. Answering at once instead would
// make a member whose own checkpoint is on a dead host spend every retry in
// a few milliseconds.
#include "common/log.h"
#include "scheduler/broker.h"

namespace swept::scheduler {

using namespace swept::protocol;

namespace {

CheckpointPart refusal(const CheckpointPull& pull, std::string why) {
  return CheckpointPart{pull.trial_id, pull.attempt, pull.from_trial_id, pull.from_attempt, pull.path,
                        pull.offset,   {},            {},                 std::move(why)};
}

std::string segment_name(int64_t trial_id, int attempt) {
  return "trial " + std::to_string(trial_id) + " segment " + std::to_string(attempt);
}

}  // namespace

Status Broker::on_checkpoint_pull(AgentSession& s, const CheckpointPull& pull) {
  const LiveTrial* lt = lifecycle_.find(pull.trial_id);
  if (!lt || lt->attempt != pull.attempt || lt->agent != s.name) {
    refused_log_.write(clock_.now_ms(), "agent " + s.name + " pulled a checkpoint for trial " +
                                            std::to_string(pull.trial_id) + " attempt " +
                                            std::to_string(pull.attempt) + ", which it does not run: refused");
    send_later(s.routing_id, refusal(pull, "trial " + std::to_string(pull.trial_id) + " attempt " +
                                               std::to_string(pull.attempt) + " is not this agent's to start"));
    return Status::Ok();
  }
  SWEPT_ASSIGN_OR_RETURN(place, store_.attempt_place(pull.from_trial_id, pull.from_attempt));
  const std::string source = segment_name(pull.from_trial_id, pull.from_attempt);
  if (!place || place->sweep_id != lt->sweep_id) {
    send_later(s.routing_id, refusal(pull, source + " is not a segment of sweep " + std::to_string(lt->sweep_id)));
    return Status::Ok();
  }
  const AgentSession* holder = agents_.by_name(place->agent);
  if (!holder) {
    refused_log_.write(clock_.now_ms(), "agent " + s.name + " pulls the checkpoint of " + source + " from agent " +
                                            place->agent + ", which is not connected: the pull waits for it");
    return Status::Ok();
  }
  CheckpointPull relayed = pull;
  relayed.sweep_id = lt->sweep_id;  // the holder finds the folder by it; the puller's word is not taken
  send_later(holder->routing_id, relayed);
  return Status::Ok();
}

Status Broker::on_checkpoint_part(AgentSession& s, const CheckpointPart& part) {
  SWEPT_ASSIGN_OR_RETURN(place, store_.attempt_place(part.from_trial_id, part.from_attempt));
  const LiveTrial* lt = lifecycle_.find(part.trial_id);
  if (!place || place->agent != s.name || !lt || lt->attempt != part.attempt || lt->sweep_id != place->sweep_id) {
    // The puller's attempt ended meanwhile (stopped, lost), or the sender
    // does not hold that segment: nobody is waiting for this part.
    log::debug("a CHECKPOINT_PART from agent " + s.name + " for trial " + std::to_string(part.trial_id) + " attempt " +
               std::to_string(part.attempt) + " is for no pull: dropped");
    return Status::Ok();
  }
  const AgentSession* puller = agents_.by_name(lt->agent);
  if (!puller) return Status::Ok();
  // The bytes go on as they came, a frame of their own; an agent from before
  // that frame gets them as base64 in the body (docs/protocol.md).
  CheckpointPart relayed = part;
  relayed.data_in_body = !puller->checkpoint_frames;
  send_later(puller->routing_id, std::move(relayed));
  return Status::Ok();
}

}  // namespace swept::scheduler
