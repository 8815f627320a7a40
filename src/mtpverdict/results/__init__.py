"""Legacy field specs, used only by the campaign TOML reader (collect/campaign.py) until it moves."""
