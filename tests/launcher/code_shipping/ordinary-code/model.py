"""The classifier: a small CNN over 8x8 digits."""

import tensorflow as tf


def build_model(config: dict) -> tf.keras.Model:
    inputs = tf.keras.Input(shape=(8, 8, 1))
    x = inputs
    for filters in config.get("filters", [32, 64]):
        x = tf.keras.layers.Conv2D(filters, 3, padding="same", activation="relu")(x)
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    x = tf.keras.layers.Dropout(config.get("dropout", 0.1))(x)
    outputs = tf.keras.layers.Dense(10, activation="softmax")(x)
    return tf.keras.Model(inputs, outputs, name="digits_cnn")
