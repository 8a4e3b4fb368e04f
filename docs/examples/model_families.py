"""Models people really have, as xpubench takes them (docs/your-model.md, "Worked examples"): built from
their configurations, no weights downloaded. Each function imports its library itself, so the file
loads where only some of them are installed, and each plans on its own framework.

    xpubench run --model docs/examples/model_families.py:tiny_bert --mode train,infer --quick
    xpubench run --model docs/examples/model_families.py:resnet18 --mode infer --quick

Nothing is wrapped: xpubench takes the logits from a Hugging Face output object itself, reads the
vocabulary from a Hugging Face config, and feeds torchvision its NCHW input as the shape says.
"""


def resnet18():
    """torchvision's ResNet-18: NCHW images, 1,000 classes (published: 1.814 GMAC = 3.628 GFLOP)."""
    from torchvision.models import resnet18 as build

    return {"model": build(weights=None), "input_shape": (3, 224, 224), "task": "classes:1000"}


def vit_b_16():
    """torchvision's ViT-B/16 (published: 17.564 GMAC = 35.13 GFLOP). Under eval() its
    nn.MultiheadAttention takes torch's fused fast path, which xpubench counts with its own formula."""
    from torchvision.models import vit_b_16 as build

    return {"model": build(weights=None), "input_shape": (3, 224, 224), "task": "classes:1000"}


def bert_classifier():
    """Hugging Face BERT-base for sequence classification, 128 tokens: returns a
    SequenceClassifierOutput (its .logits are taken); the vocabulary is the config's (30,522)."""
    from transformers import BertConfig, BertForSequenceClassification

    model = BertForSequenceClassification(BertConfig(num_labels=2))
    return {"model": model, "input_shape": (128,), "input_dtype": "int32", "task": "classes:2"}


def tiny_bert():
    """The same class, small enough to train in seconds on a laptop CPU."""
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=64, num_labels=2)
    return {"model": BertForSequenceClassification(config), "input_shape": (32,), "input_dtype": "int32",
            "task": "classes:2"}


def gpt2_lm():
    """Hugging Face GPT-2 (124M) with its language-model head, 128 tokens: next-token logits
    (.logits of a CausalLMOutputWithCrossAttentions) over the 50,257-token vocabulary."""
    from transformers import GPT2Config, GPT2LMHeadModel

    return {"model": GPT2LMHeadModel(GPT2Config()), "input_shape": (128,), "input_dtype": "int32",
            "task": "tokens:50257"}


def mobilenet_v2():
    """keras.applications' MobileNetV2 (channels-last images). classifier_activation=None: the default
    ends in a softmax, and the loss takes logits (xpubench warns when a model returns probabilities)."""
    import keras

    model = keras.applications.MobileNetV2(weights=None, classifier_activation=None)
    return {"model": model, "input_shape": (224, 224, 3), "task": "classes:1000"}


def xpubench_gpt():
    """xpubench's own GPT decoder (the built-in gpt workload's 'small' preset) as a user's model: its
    attention is F.scaled_dot_product_attention, counted on the kernel that runs."""
    from xpubench.workloads import gpt

    spec = gpt.PRESETS["small"]
    return {"model": gpt.build_torch(spec), "input_shape": spec.input_shape, "input_dtype": "int32",
            "task": f"tokens:{spec.num_outputs}"}
