"""Keras 3 models shared by the TensorFlow and JAX notebooks. **Importing a module here imports
Keras**, and with it the backend named by ``KERAS_BACKEND`` (TensorFlow by default): set it
before the first import.

- ``models``: the seed's CIFAR-10 CNN and its variants.
- ``timing``: the one epoch timer (``EpochTimer``; steady epochs: the median of epochs 2..).
"""
