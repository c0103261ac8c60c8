"""The models of generate.py, train.py, compiled.py, graphed.py and ddp.py (random weights, nothing downloaded), as a
user's own module beside the scripts; bench/overhead_ab.py builds the same models from here."""
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM


def generation_model(name):
    """(config, model): gpt2 (gpt2-medium's shape) or llama (a small Llama), fp16, in eval mode, on the GPU."""
    torch.manual_seed(0)
    if name == "gpt2":
        config, cls = GPT2Config(n_layer=24, n_embd=1024, n_head=16), GPT2LMHeadModel
    else:
        config = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=12, num_attention_heads=16,
                             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=512)
        cls = LlamaForCausalLM
    with torch.device("cuda"):
        model = cls(config).to(torch.float16).eval()
    return config, model


def generation_prompt(config):
    """The 32-token prompt every generation starts from."""
    return torch.randint(0, config.vocab_size, (1, 32), generator=torch.Generator().manual_seed(1)).cuda()


def training_model():
    """(config, model, optimizer): GPT-2 small with gradient checkpointing (not re-entrant), AdamW, on the GPU."""
    torch.manual_seed(0)
    config = GPT2Config(n_layer=8, n_embd=512, n_head=8, vocab_size=8192, n_positions=256)
    with torch.device("cuda"):
        model = GPT2LMHeadModel(config)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
    return config, model, opt


def train_step(model, opt, x):
    """One step: bf16 autocast forward, backward, gradients clipped to norm 1, AdamW's step; returns the loss."""
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(input_ids=x, labels=x).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def compiled_model(mode="default"):
    """(model, optimizer, compiled model): a small Transformer encoder with a linear head, SGD, torch.compile'd
    (inductor, `mode`); it compiles at its first call."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=2048, dropout=0.0,
                                             batch_first=True)
    model = torch.nn.Sequential(torch.nn.TransformerEncoder(layer, num_layers=4), torch.nn.Linear(512, 16)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    return model, opt, torch.compile(model, mode=mode)


def compiled_step(step_fn, opt, x, y):
    """One step of compiled.py's loop: forward through the compiled model, cross-entropy, backward, SGD; returns
    the loss."""
    out = step_fn(x)
    loss = torch.nn.functional.cross_entropy(out.reshape(-1, 16), y.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss


def graphed_model(static_x, static_y):
    """(graph, static loss): graphed.py's MLP (1024-4096-4096-10, GELU), cross-entropy and SGD with momentum, its
    whole training step (forward, backward, optimizer step) captured as a CUDA graph after three warm-up steps on
    a side stream (the recipe of PyTorch's CUDA-graph notes). Each replay trains on what static_x (256 x 1024) and
    static_y (256 class indices) hold; the static loss holds its loss."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 4096),
                                torch.nn.GELU(), torch.nn.Linear(4096, 10)).cuda()
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            loss_fn(model(static_x), static_y).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        static_loss = loss_fn(model(static_x), static_y)
        static_loss.backward()
        opt.step()
    return graph, static_loss


def graphed_step(graph, static_x, static_y, x, y):
    """One step of graphed.py's loop: the batch (x, y) copied into the static inputs the graph was captured on,
    then the captured training step replayed."""
    static_x.copy_(x)
    static_y.copy_(y)
    graph.replay()


def graphed_inputs(steps):
    """graphed.py's data: `steps` batches of inputs and labels on the GPU, and the static copies of the first that
    the graph is captured on."""
    g = torch.Generator(device="cuda").manual_seed(4)
    xs = torch.randn(steps, 256, 1024, device="cuda", generator=g)
    ys = torch.randint(0, 10, (steps, 256), device="cuda", generator=g)
    return xs, ys, xs[0].clone(), ys[0].clone()


def ddp_model(local, width=4096, layers=8):
    """(ddp, optimizer): ddp.py's model, `layers` square `width`-wide linear layers with ReLU between them on GPU
    `local`, wrapped in DistributedDataParallel (the process group started), AdamW."""
    from torch.nn.parallel import DistributedDataParallel
    torch.manual_seed(0)
    stack = []
    for _ in range(layers):
        stack += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    ddp = DistributedDataParallel(torch.nn.Sequential(*stack[:-1]).cuda(), device_ids=[local])
    return ddp, torch.optim.AdamW(ddp.parameters(), lr=1e-3)


def ddp_step(ddp, opt, x):
    """One step of ddp.py's loop: the model fits x to itself (mean squared error), backward (DDP reduces the
    gradients across the ranks), AdamW's step; returns the loss."""
    loss = (ddp(x) - x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss
