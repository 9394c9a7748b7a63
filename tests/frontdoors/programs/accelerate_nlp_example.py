# An Accelerate program in the style of accelerate's examples/nlp_example.py (written here).
import argparse
import os
from types import SimpleNamespace

import numpy as np
import torch
from torch.optim import AdamW
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, Dataset

from accelerate import Accelerator, DistributedType
from accelerate.logging import get_logger
from accelerate.utils import set_seed

logger = get_logger(__name__)

VOCAB, SEQ = 50, 12


class PairDataset(Dataset):
    def __init__(self, n, seed):
        rng = np.random.default_rng(seed)
        self.ids = rng.integers(1, VOCAB, (n, SEQ))
        self.lens = rng.integers(4, SEQ + 1, n)
        self.labels = (self.ids[:, 0] > VOCAB // 2).astype(np.int64)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        mask = (np.arange(SEQ) < self.lens[i]).astype(np.int64)
        return {"input_ids": torch.tensor(self.ids[i] * mask), "attention_mask": torch.tensor(mask),
                "labels": torch.tensor(self.labels[i])}


class TinyClassifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 16)
        self.pre = torch.nn.Linear(16, 16)
        self.dropout = torch.nn.Dropout(0.0)
        self.head = torch.nn.Linear(16, 2)

    def forward(self, input_ids, attention_mask, labels=None):
        h = self.emb(input_ids) * attention_mask.unsqueeze(-1)
        h = h.sum(1) / attention_mask.sum(1, keepdim=True)
        logits = self.head(self.dropout(torch.tanh(self.pre(h))))
        loss = torch.nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SimpleNamespace(loss=loss, logits=logits)


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(step):
        if step < num_warmup_steps:
            return float(step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - step) /
                   float(max(1, num_training_steps - num_warmup_steps)))
    return LambdaLR(optimizer, lr_lambda)


def training_function(config, args):
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision,
                              gradient_accumulation_steps=args.accum)
    lr, num_epochs, seed, batch_size = config["lr"], int(config["num_epochs"]), \
        int(config["seed"]), int(config["batch_size"])
    set_seed(seed)
    with accelerator.main_process_first():
        train_ds, eval_ds = PairDataset(96, 1), PairDataset(45, 2)
    train_dataloader = DataLoader(train_ds, shuffle=True, batch_size=batch_size, drop_last=False)
    eval_dataloader = DataLoader(eval_ds, shuffle=False, batch_size=batch_size)
    model = TinyClassifier()
    model = model.to(accelerator.device)
    no_decay = ["bias"]
    groups = [{"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
               "weight_decay": 0.01},
              {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
               "weight_decay": 0.0}]
    optimizer = AdamW(params=groups, lr=lr)
    total = (len(train_dataloader) * num_epochs) // args.accum
    lr_scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=total // 8,
                                                   num_training_steps=total)
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler)
    if accelerator.distributed_type != DistributedType.NO:
        accelerator.print("distributed:", accelerator.distributed_type, accelerator.num_processes)
    starting_epoch, resume_step, overall_step = 0, None, 0
    checkpointing_steps = args.checkpointing_steps
    if checkpointing_steps is not None and checkpointing_steps.isdigit():
        checkpointing_steps = int(checkpointing_steps)
    if args.resume_from_checkpoint:
        accelerator.print(f"Resumed from checkpoint: {args.resume_from_checkpoint}")
        accelerator.load_state(args.resume_from_checkpoint)
        path = os.path.basename(args.resume_from_checkpoint.rstrip("/"))
        training_difference = os.path.splitext(path)[0]
        if "epoch" in training_difference:
            starting_epoch = int(training_difference.replace("epoch_", "")) + 1
        else:
            resume_step = int(training_difference.replace("step_", ""))
            starting_epoch = resume_step // len(train_dataloader)
            resume_step -= starting_epoch * len(train_dataloader)
            overall_step = starting_epoch * len(train_dataloader)
    for epoch in range(starting_epoch, num_epochs):
        model.train()
        if args.resume_from_checkpoint and epoch == starting_epoch and resume_step is not None:
            active_dataloader = accelerator.skip_first_batches(train_dataloader, resume_step)
            overall_step += resume_step
        else:
            active_dataloader = train_dataloader
        for step, batch in enumerate(active_dataloader):
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            with accelerator.accumulate(model):
                outputs = model(**batch)
                loss = outputs.loss
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            overall_step += 1
            if isinstance(checkpointing_steps, int) and overall_step % checkpointing_steps == 0:
                accelerator.save_state(f"{args.output_dir}/step_{overall_step}")
                if args.stop_at_step == overall_step:
                    return
        model.eval()
        correct = seen = 0
        losses = []
        for step, batch in enumerate(eval_dataloader):
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            with torch.no_grad():
                outputs = model(**batch)
            predictions = outputs.logits.argmax(dim=-1)
            predictions, references = accelerator.gather_for_metrics((predictions, batch["labels"]))
            losses.append(accelerator.gather_for_metrics(outputs.loss.repeat(batch_size)))
            correct += int((predictions == references).sum().item())
            seen += len(references)
        eval_loss = torch.cat(losses).mean().item()
        accelerator.print(f"epoch {epoch}: accuracy {correct}/{seen} eval_loss {eval_loss:.5f} "
                          f"lr {lr_scheduler.get_last_lr()[0]:.6f}")
        assert seen == len(eval_ds), (seen, len(eval_ds))
        if args.checkpointing_steps == "epoch" and args.output_dir:
            accelerator.save_state(f"{args.output_dir}/epoch_{epoch}")
        if args.stop_after is not None and epoch == args.stop_after:
            break
    accelerator.wait_for_everyone()
    if args.output_dir:
        accelerator.save_state(args.output_dir + "/state")
        unwrapped = accelerator.unwrap_model(model)
        accelerator.save_model(unwrapped, args.output_dir + "/model")
    accelerator.end_training()


def main():
    parser = argparse.ArgumentParser(description="Simple example of training script.")
    parser.add_argument("--mixed_precision", type=str, default=None,
                        choices=["no", "fp16", "bf16", "fp8"])
    parser.add_argument("--cpu", action="store_true", help="If passed, will train on the CPU.")
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--accum", type=int, default=1)
    parser.add_argument("--output_dir", default=None)
    parser.add_argument("--checkpointing_steps", default=None)
    parser.add_argument("--resume_from_checkpoint", default=None)
    parser.add_argument("--stop_after", type=int, default=None)
    parser.add_argument("--stop_at_step", type=int, default=None)
    args = parser.parse_args()
    config = {"lr": 2e-2, "num_epochs": 3, "seed": 42, "batch_size": args.batch_size}
    training_function(config, args)


if __name__ == "__main__":
    main()
