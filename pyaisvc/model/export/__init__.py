"""Model weights -> asset files.

common.py writes the format; smol.py, qwen.py and synthetic.py describe models.
"""
