// Command-line parsing with Boost.Program_options (see options.h). Boost
// throws; every exception is caught here and becomes an InvalidArgument.
// Hyphen spellings are accepted by rewriting "--batch-size" to "--batch_size"
// before parsing; --config files are turned into the same "--name=value"
// tokens and parsed by the same description, after the command line, so the
// command line wins (program_options keeps the first value stored).
#include "trainer/options.h"

#include <boost/program_options.hpp>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include <pwd.h>
#include <unistd.h>

#include "trainer/cpu/kernel_choice.h"

namespace swept::trainer {
namespace po = boost::program_options;

#ifndef SWEPT_VERSION
#define SWEPT_VERSION "0"
#endif

namespace {

po::options_description describe() {
  po::options_description model("Model and training");
  model.add_options()
      ("model", po::value<std::string>()->default_value("mlp"), "mlp | cnn")
      ("hidden", po::value<int>()->default_value(100), "mlp: hidden units H of 784-H-10")
      ("activation", po::value<std::string>()->default_value("relu"), "mlp: hidden activation, relu | sigmoid (the tutorial's)")
      ("dropout", po::value<double>()->default_value(0.0), "drop probability before the last layer, [0, 1)")
      ("optimizer", po::value<std::string>(), "sgd | momentum | adam (default: momentum for mlp, adam for cnn)")
      ("lr", po::value<double>(), "learning rate > 0 (default: 0.5 with sgd, 0.1 with momentum, adam 0.001 mlp / 0.002 cnn)")
      ("momentum", po::value<double>()->default_value(0.9, "0.9"), "momentum coefficient, [0, 1)")
      ("nesterov", po::value<bool>()->default_value(false, "false")->implicit_value(true, "true"), "Nesterov momentum")
      ("beta1", po::value<double>()->default_value(0.9, "0.9"), "adam: beta1, [0, 1)")
      ("beta2", po::value<double>()->default_value(0.999), "adam: beta2, [0, 1)")
      ("epsilon", po::value<double>()->default_value(1e-8), "adam: epsilon > 0")
      ("weight_decay", po::value<double>()->default_value(0.0), "L2 weight decay on weights (not biases), >= 0")
      ("schedule", po::value<std::string>()->default_value("cosine"), "constant | step | cosine (to 0 at the last step)")
      ("warmup_steps", po::value<int64_t>()->default_value(0), "linear learning-rate warmup steps")
      ("decay_steps", po::value<int64_t>()->default_value(0), "step schedule: steps between decays (0: one epoch)")
      ("decay_rate", po::value<double>()->default_value(0.1, "0.1"), "step schedule: factor per decay, (0, 1]")
      ("scale_lr", po::value<bool>()->default_value(false, "false")->implicit_value(true, "true"),
       "linear scaling rule: lr x batch_size / base_batch")
      ("base_batch", po::value<int>()->default_value(100), "the batch size --lr is meant for, with --scale_lr")
      ("batch_size", po::value<int>(), "global batch size, split over replicas (default: 100 mlp, 128 cnn)")
      ("epochs", po::value<int>(), "epochs to train (default: 5 mlp, 2 cnn)")
      ("max_steps", po::value<int64_t>()->default_value(0), "stop after this many steps (0: epochs decide)")
      ("seed", po::value<uint64_t>()->default_value(0), "seed of initialisation, data order and dropout")
      ("val_fraction", po::value<double>()->default_value(1.0 / 12.0, "1/12"),
       "fraction of the training set held out for validation, [0, 1) (1/12: 5000 of 60000)")
      ("data", po::value<std::string>(),
       "folder with the four MNIST IDX files (default: $SWEPT_DATA_DIR, else "
       "$XDG_DATA_HOME/swept/mnist, else ~/.local/share/swept/mnist: where swept-fetch-mnist puts them)");
  po::options_description run("Device and run");
  run.add_options()
      ("device", po::value<std::string>()->default_value("cpu"), "cpu | cuda (every visible GPU) | cuda:N")
      ("replicas", po::value<int>()->default_value(0),
       "synchronous data-parallel replicas (0: 1 on cpu, one per GPU on cuda)")
      ("threads", po::value<int>()->default_value(0), "CPU threads in all (0: every core)")
      ("gpu_memory_fraction", po::value<double>(),
       "cuda: cap on GPU memory, (0, 1] of each device (default: $SWEPT_GPU_MEMORY_FRACTION, else no cap)")
      ("checkpoint_dir", po::value<std::string>()->default_value(""), "write checkpoints here (empty: none)")
      ("checkpoint_every", po::value<int64_t>()->default_value(0), "steps between checkpoints (0: only at the end)")
      ("resume", po::value<bool>()->default_value(false, "false")->implicit_value(true, "true"),
       "continue from the newest valid checkpoint in --checkpoint_dir (default then: $SWEPT_CHECKPOINT_DIR); "
       "lr, momentum, weight decay, dropout, batch size and the schedule may differ from the checkpoint's")
      ("log_every", po::value<int64_t>()->default_value(100), "steps between loss lines, >= 1")
      ("eval_every", po::value<int64_t>()->default_value(0), "steps between validations (0: each epoch's end)")
      ("strategy", po::value<std::string>()->default_value("allreduce"),
       "allreduce | ps (parameter servers; the cluster from TF_CONFIG, trainer/README.md)")
      ("ps_mode", po::value<std::string>(), "ps: async (every push applied as it arrives) | sync (default async)")
      ("backup_workers", po::value<int>(), "ps sync: each step drops the last K workers' gradients (default 0)")
      ("max_staleness", po::value<int>(),
       "ps async: a worker more than S pushes ahead of the slowest waits (default 0: unbounded)")
      ("test_every", po::value<int64_t>()->default_value(0),
       "steps between test-set evaluations, for measuring (0: only at the end; never pick by them)")
      ("config", po::value<std::string>(), "JSON file of {\"name\": value} with these names")
      ("help", "this text")
      ("version", "the version and the backends built in");
  po::options_description all("swept-train: trains an MLP or CNN on MNIST; metric lines (docs/metrics.md) on "
                              "stdout, logs on stderr.\nEvery option is --name=value; hyphens may replace "
                              "underscores");
  all.add(model).add(run);
  return all;
}

// "--batch-size=3" -> "--batch_size=3"; values and other tokens untouched.
std::string underscore_name(const std::string& token) {
  if (token.rfind("--", 0) != 0) return token;
  std::string out = token;
  const size_t end = std::min(out.find('='), out.size());
  for (size_t i = 2; i < end; ++i)
    if (out[i] == '-') out[i] = '_';
  return out;
}

Status config_file_tokens(const std::string& path, std::vector<std::string>* tokens) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("--config " + path + ": cannot open the file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    return Status::InvalidArgument("--config " + path + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) return Status::InvalidArgument("--config " + path + ": must hold one JSON object of options");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string name = underscore_name("--" + it.key()).substr(2);
    if (name == "config" || name == "help" || name == "version")
      return Status::InvalidArgument("--config " + path + ": \"" + it.key() + "\" cannot be set from a file");
    std::string value;
    if (it->is_string()) value = it->get<std::string>();
    else if (it->is_boolean()) value = it->get<bool>() ? "true" : "false";
    else if (it->is_number()) value = it->dump();
    else
      return Status::InvalidArgument("--config " + path + ": \"" + it.key() +
                                     "\" must be a string, number or boolean");
    tokens->push_back("--" + name + "=" + value);
  }
  return Status::Ok();
}

Status bad(const std::string& what) { return Status::InvalidArgument(what + " (see swept-train --help)"); }

}  // namespace

std::string version_text() {
  std::string backends = "cpu";
#if defined(SWEPT_HAVE_CUDA)
  backends += ", cuda";
#endif
  std::string text = "swept-train " SWEPT_VERSION " (backends: " + backends + ")";
#if defined(SWEPT_HAVE_CUDA)
  text += "; cuda: " + cuda_build_description();  // the runtime and the driver it needs
#endif
#if !defined(SWEPT_HAVE_CUDA)
  text += "; built without CUDA";
#endif
  return text + "\nCPU kernels: " + cpu::kernel_choice().description();
}

// The steps of parse_command_line, each reading one group of options from the
// parsed map into the config. Each returns the first bad value it meets, and
// they run in the order of --help, so a command line with several bad values
// is told about the same one as before the steps were split.
namespace {

// The command line (hyphens rewritten), then the --config file's tokens,
// stored into one map; the command line's values win.
Result<po::variables_map> read_variables(const std::vector<std::string>& raw_args,
                                         const po::options_description& desc) {
  std::vector<std::string> args;
  for (const std::string& a : raw_args) args.push_back(underscore_name(a));
  for (size_t i = 0; i < args.size(); ++i) {
    const bool after_bare_name = i > 0 && args[i - 1].rfind("--", 0) == 0 && args[i - 1].find('=') == std::string::npos;
    if (args[i].rfind("-", 0) != 0 && !after_bare_name)
      return bad("unexpected argument '" + args[i] + "': every option is --name=value");
  }
  po::variables_map vm;
  const po::positional_options_description no_positionals;  // every value is --name=value
  try {
    po::store(po::command_line_parser(args).options(desc).positional(no_positionals).run(), vm);
    if (vm.count("config")) {
      std::vector<std::string> tokens;
      const std::string path = vm["config"].as<std::string>();
      SWEPT_RETURN_IF_ERROR(config_file_tokens(path, &tokens));
      try {
        po::store(po::command_line_parser(tokens).options(desc).run(), vm);
      } catch (const po::error& e) {
        return bad("--config " + path + ": " + e.what());
      }
    }
    po::notify(vm);
  } catch (const po::error& e) {
    return bad(e.what());
  }
  return vm;
}

// --model, --hidden, --activation, --dropout.
Status read_model(const po::variables_map& vm, TrainConfig& c) {
  const std::string model = vm["model"].as<std::string>();
  if (model == "mlp") c.model.kind = ModelKind::kMlp;
  else if (model == "cnn") c.model.kind = ModelKind::kCnn;
  else return bad("--model=" + model + ": expected mlp or cnn");
  c.model.hidden = vm["hidden"].as<int>();
  if (c.model.hidden < 1 || c.model.hidden > 65536) return bad("--hidden must be in [1, 65536]");
  const std::string act = vm["activation"].as<std::string>();
  if (act == "sigmoid") c.model.hidden_activation = Activation::kSigmoid;
  else if (act == "relu") c.model.hidden_activation = Activation::kRelu;
  else return bad("--activation=" + act + ": expected sigmoid or relu");
  const double dropout = vm["dropout"].as<double>();
  if (!(dropout >= 0 && dropout < 1)) return bad("--dropout must be in [0, 1)");
  c.model.dropout = static_cast<float>(dropout);
  return Status::Ok();
}

// --optimizer, --lr and the optimizer's coefficients, --weight_decay; the
// defaults of the first two depend on the model, read before.
Status read_optimizer(const po::variables_map& vm, TrainConfig& c) {
  const bool mlp = c.model.kind == ModelKind::kMlp;
  const std::string opt = vm.count("optimizer") ? vm["optimizer"].as<std::string>() : (mlp ? "momentum" : "adam");
  if (opt == "sgd") c.optimizer.kind = OptimizerKind::kSgd;
  else if (opt == "momentum") c.optimizer.kind = OptimizerKind::kMomentum;
  else if (opt == "adam") c.optimizer.kind = OptimizerKind::kAdam;
  else return bad("--optimizer=" + opt + ": expected sgd, momentum or adam");
  if (vm.count("lr")) c.lr = vm["lr"].as<double>();
  // The CNN's Adam default is 2e-3 with 2 epochs: 99.18% and 99.28% test accuracy (seeds 0, 1)
  // in two thirds of the time of 1e-3 with 3 epochs (docs/benchmarks.md, time to accuracy).
  else if (c.optimizer.kind == OptimizerKind::kAdam) c.lr = mlp ? 1e-3 : 2e-3;
  else c.lr = c.optimizer.kind == OptimizerKind::kMomentum ? 0.1 : 0.5;
  if (!(c.lr > 0) || !std::isfinite(c.lr)) return bad("--lr must be a number > 0");
  const double momentum = vm["momentum"].as<double>();
  if (!(momentum >= 0 && momentum < 1)) return bad("--momentum must be in [0, 1)");
  c.optimizer.momentum = static_cast<float>(momentum);
  c.optimizer.nesterov = vm["nesterov"].as<bool>();
  const double beta1 = vm["beta1"].as<double>(), beta2 = vm["beta2"].as<double>();
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1)) return bad("--beta1 and --beta2 must be in [0, 1)");
  c.optimizer.beta1 = static_cast<float>(beta1);
  c.optimizer.beta2 = static_cast<float>(beta2);
  const double epsilon = vm["epsilon"].as<double>();
  if (!(epsilon > 0)) return bad("--epsilon must be > 0");
  c.optimizer.epsilon = static_cast<float>(epsilon);
  c.weight_decay = vm["weight_decay"].as<double>();
  if (!(c.weight_decay >= 0) || !std::isfinite(c.weight_decay)) return bad("--weight_decay must be >= 0");
  return Status::Ok();
}

// --schedule and its steps and rate, --scale_lr, --base_batch.
Status read_schedule(const po::variables_map& vm, TrainConfig& c) {
  const std::string schedule = vm["schedule"].as<std::string>();
  if (schedule == "constant") c.schedule = ScheduleKind::kConstant;
  else if (schedule == "step") c.schedule = ScheduleKind::kStep;
  else if (schedule == "cosine") c.schedule = ScheduleKind::kCosine;
  else return bad("--schedule=" + schedule + ": expected constant, step or cosine");
  c.warmup_steps = vm["warmup_steps"].as<int64_t>();
  if (c.warmup_steps < 0) return bad("--warmup_steps must be >= 0");
  c.decay_steps = vm["decay_steps"].as<int64_t>();
  if (c.decay_steps < 0) return bad("--decay_steps must be >= 0");
  c.decay_rate = vm["decay_rate"].as<double>();
  if (!(c.decay_rate > 0 && c.decay_rate <= 1)) return bad("--decay_rate must be in (0, 1]");
  c.scale_lr = vm["scale_lr"].as<bool>();
  c.base_batch = vm["base_batch"].as<int>();
  if (c.base_batch < 1) return bad("--base_batch must be >= 1");
  return Status::Ok();
}

// The per-user MNIST folder, as the XDG base directory spec places data:
// $XDG_DATA_HOME/swept/mnist when that is an absolute path (the spec says to
// ignore a relative one), else $HOME/.local/share/swept/mnist, with HOME
// taken from the password database when unset. Never the build machine's
// source tree: an installed swept-train must not point there.
std::string per_user_data_dir(const EnvLookup& env) {
  if (auto x = env("XDG_DATA_HOME"); x && !x->empty() && x->front() == '/') return *x + "/swept/mnist";
  std::string home;
  if (auto h = env("HOME"); h && !h->empty()) {
    home = *h;
  } else if (const passwd* pw = getpwuid(getuid()); pw && pw->pw_dir) {
    home = pw->pw_dir;
  }
  return home + "/.local/share/swept/mnist";
}

// --batch_size, --epochs, --max_steps, --seed, --val_fraction and the data
// folder (--data, else $SWEPT_DATA_DIR, else the per-user folder).
Status read_length_and_data(const po::variables_map& vm, const EnvLookup& env, TrainConfig& c) {
  const bool mlp = c.model.kind == ModelKind::kMlp;
  c.batch_size = vm.count("batch_size") ? vm["batch_size"].as<int>() : (mlp ? 100 : 128);
  if (c.batch_size < 1) return bad("--batch_size must be >= 1");
  c.epochs = vm.count("epochs") ? vm["epochs"].as<int>() : (mlp ? 5 : 2);
  if (c.epochs < 1) return bad("--epochs must be >= 1");
  c.max_steps = vm["max_steps"].as<int64_t>();
  if (c.max_steps < 0) return bad("--max_steps must be >= 0");
  c.seed = vm["seed"].as<uint64_t>();
  c.val_fraction = vm["val_fraction"].as<double>();
  if (!(c.val_fraction >= 0 && c.val_fraction < 1)) return bad("--val_fraction must be in [0, 1)");
  if (vm.count("data")) {
    c.data_dir = vm["data"].as<std::string>();
  } else if (auto d = env("SWEPT_DATA_DIR"); d && !d->empty()) {
    c.data_dir = *d;
  } else {
    c.data_dir = per_user_data_dir(env);
  }
  return Status::Ok();
}

// The GPU memory cap: on CUDA from --gpu_memory_fraction, else from
// $SWEPT_GPU_MEMORY_FRACTION; on the CPU the option is checked and ignored,
// and the variable not read at all.
Status read_gpu_memory_fraction(const po::variables_map& vm, const EnvLookup& env, TrainConfig& c) {
  if (c.device != DeviceKind::kCuda) {
    if (vm.count("gpu_memory_fraction")) {
      const double f = vm["gpu_memory_fraction"].as<double>();
      if (!(f > 0 && f <= 1)) return bad("--gpu_memory_fraction must be in (0, 1]");
    }
    return Status::Ok();
  }
  std::optional<std::string> fraction;
  std::string source = "--gpu_memory_fraction";
  if (vm.count("gpu_memory_fraction")) {
    fraction = std::to_string(vm["gpu_memory_fraction"].as<double>());
  } else if (auto f = env("SWEPT_GPU_MEMORY_FRACTION"); f && !f->empty()) {
    fraction = *f;
    source = "SWEPT_GPU_MEMORY_FRACTION=" + *f;
  }
  if (fraction) {
    char* end = nullptr;
    const double f = std::strtod(fraction->c_str(), &end);
    if (end == fraction->c_str() || *end != '\0' || !(f > 0 && f <= 1))
      return bad(source + ": the GPU memory fraction must be a number in (0, 1]");
    c.gpu_memory_fraction = f;
  }
  return Status::Ok();
}

// --device, --replicas (which must divide the batch, read before),
// --threads, then the GPU memory cap.
Status read_device(const po::variables_map& vm, const EnvLookup& env, TrainConfig& c) {
  const std::string device = vm["device"].as<std::string>();
  if (device == "cpu") {
    c.device = DeviceKind::kCpu;
  } else if (device == "cuda") {
    c.device = DeviceKind::kCuda;
  } else if (device.rfind("cuda:", 0) == 0 && device.size() > 5 &&
             device.find_first_not_of("0123456789", 5) == std::string::npos && device.size() < 10) {
    c.device = DeviceKind::kCuda;
    c.device_index = std::stoi(device.substr(5));
  } else {
    return bad("--device=" + device + ": expected cpu, cuda or cuda:N");
  }
  c.replicas = vm["replicas"].as<int>();
  if (c.replicas < 0 || c.replicas > 1024) return bad("--replicas must be in [0, 1024]");
  const int replicas_for_check = c.replicas == 0 ? 1 : c.replicas;
  if (c.batch_size % replicas_for_check != 0)
    return bad("--batch_size=" + std::to_string(c.batch_size) + " is not divisible by --replicas=" +
               std::to_string(c.replicas) + ": each replica takes an equal share");
  c.threads = vm["threads"].as<int>();
  if (c.threads < 0 || c.threads > 4096) return bad("--threads must be in [0, 4096]");
  return read_gpu_memory_fraction(vm, env, c);
}

// --checkpoint_dir, --checkpoint_every, --resume, --log_every, --eval_every,
// --test_every, and $SWEPT_PBT_STOP_STEP. --resume without --checkpoint_dir
// takes $SWEPT_CHECKPOINT_DIR, the folder a swept agent gives each trial (and
// where population-based training puts the checkpoint a member continues
// from), so a sweep's command needs only --resume.
Status read_checkpoints_and_logging(const po::variables_map& vm, const EnvLookup& env, TrainConfig& c) {
  c.checkpoint_dir = vm["checkpoint_dir"].as<std::string>();
  c.checkpoint_every = vm["checkpoint_every"].as<int64_t>();
  if (c.checkpoint_every < 0) return bad("--checkpoint_every must be >= 0");
  c.resume = vm["resume"].as<bool>();
  if (c.resume && c.checkpoint_dir.empty()) {
    if (auto d = env("SWEPT_CHECKPOINT_DIR"); d && !d->empty()) c.checkpoint_dir = *d;
    else return bad("--resume needs --checkpoint_dir (or SWEPT_CHECKPOINT_DIR, which a swept agent sets)");
  }
  c.log_every = vm["log_every"].as<int64_t>();
  if (c.log_every < 1) return bad("--log_every must be >= 1");
  c.eval_every = vm["eval_every"].as<int64_t>();
  if (c.eval_every < 0) return bad("--eval_every must be >= 0");
  c.test_every = vm["test_every"].as<int64_t>();
  if (c.test_every < 0) return bad("--test_every must be >= 0");
  if (auto stop = env("SWEPT_PBT_STOP_STEP"); stop && !stop->empty()) {
    const bool digits = stop->size() < 18 && stop->find_first_not_of("0123456789") == std::string::npos;
    c.stop_step = digits ? std::stoll(*stop) : 0;
    if (c.stop_step < 1)
      return Status::InvalidArgument("SWEPT_PBT_STOP_STEP=" + *stop +
                                     ": must be a step number >= 1 (a swept scheduler sets it for a "
                                     "population-based training segment; unset it to run alone)");
  }
  return Status::Ok();
}

// --strategy and the parameter-server options. What needs the cluster (the
// number of workers, the servers' addresses) is checked where TF_CONFIG is
// read (dist/cluster.h); here, what the flags alone can tell.
Status read_strategy(const po::variables_map& vm, TrainConfig& c) {
  const std::string strategy = vm["strategy"].as<std::string>();
  if (strategy == "allreduce") c.strategy = Strategy::kAllReduce;
  else if (strategy == "ps") c.strategy = Strategy::kParameterServer;
  else return bad("--strategy=" + strategy + ": expected allreduce or ps");
  const bool ps = c.strategy == Strategy::kParameterServer;
  for (const char* name : {"ps_mode", "backup_workers", "max_staleness"})
    if (!ps && vm.count(name)) return bad(std::string("--") + name + " needs --strategy=ps");
  if (!ps) return Status::Ok();
  const std::string mode = vm.count("ps_mode") ? vm["ps_mode"].as<std::string>() : "async";
  if (mode == "async") c.ps_mode = PsMode::kAsync;
  else if (mode == "sync") c.ps_mode = PsMode::kSync;
  else return bad("--ps_mode=" + mode + ": expected async or sync");
  if (vm.count("backup_workers")) {
    if (c.ps_mode != PsMode::kSync) return bad("--backup_workers needs --ps_mode=sync (async never waits for a step)");
    c.backup_workers = vm["backup_workers"].as<int>();
    if (c.backup_workers < 0) return bad("--backup_workers must be >= 0");
  }
  if (vm.count("max_staleness")) {
    if (c.ps_mode != PsMode::kAsync) return bad("--max_staleness needs --ps_mode=async (sync is never stale)");
    c.max_staleness = vm["max_staleness"].as<int>();
    if (c.max_staleness < 0) return bad("--max_staleness must be >= 0 (0: unbounded)");
  }
  // What the servers do not implement (yet): said at once, not mid-run.
  if (c.device != DeviceKind::kCpu) return bad("--strategy=ps trains on the CPU only: drop --device");
  if (c.replicas > 1) return bad("--strategy=ps runs one replica per worker process: drop --replicas");
  if (!c.checkpoint_dir.empty() || c.resume)
    return bad("--strategy=ps writes no checkpoints (the state lives on the servers): drop --checkpoint_dir");
  return Status::Ok();
}

}  // namespace

Result<CommandLine> parse_command_line(const std::vector<std::string>& raw_args, const EnvLookup& env) {
  const po::options_description desc = describe();
  SWEPT_ASSIGN_OR_RETURN(vm, read_variables(raw_args, desc));

  CommandLine cl;
  if (vm.count("help")) {
    std::ostringstream os;
    os << desc << "\nExit codes: 0 ok, 2 bad usage or data, 3 diverged, 4 device missing, 5 out of GPU memory, "
                  "130 stopped by SIGTERM/SIGINT (docs/exit-codes.md).\n";
    cl.action = CommandLine::Action::kHelp;
    cl.text = os.str();
    return cl;
  }
  if (vm.count("version")) {
    cl.action = CommandLine::Action::kVersion;
    cl.text = version_text();
    return cl;
  }

  TrainConfig& c = cl.config;
  SWEPT_RETURN_IF_ERROR(read_model(vm, c));
  SWEPT_RETURN_IF_ERROR(read_optimizer(vm, c));
  SWEPT_RETURN_IF_ERROR(read_schedule(vm, c));
  SWEPT_RETURN_IF_ERROR(read_length_and_data(vm, env, c));
  SWEPT_RETURN_IF_ERROR(read_device(vm, env, c));
  SWEPT_RETURN_IF_ERROR(read_checkpoints_and_logging(vm, env, c));
  SWEPT_RETURN_IF_ERROR(read_strategy(vm, c));
  return cl;
}

}  // namespace swept::trainer
